"""How one config launches: named launch values, then a sequence of kernel launches.

One description serves both sides: `gpu/launcher.py` evaluates it per shape and launches through
CuPy; `records/export.py` renders the same values and steps to C for the exported header. A family
declares expressions (decl.Launch); a config folds what it fixes into them (`plan_for`). The
values are listed above `_named_values`, the steps and their arguments above `_steps`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .decl import Launch
from .expr import Expr

HELPER_BLOCK = 256  # threads of a helper kernel (_scale_c, _pack_*, _prepare, _pack_c, _unpack_c, _scale_tiles)
HELPER_GRID_MAX = 4096  # grid-stride helpers need no more blocks than this
HELPER_ITEMS = 4  # elements a thread of _scale_c, _pack_*, _unpack_c takes a pass (AT_ITEMS in _common)

# Kernel arguments (pointers, floats, integer launch values); A, B, C: as the SGEMM kernel sees them, _IN: the caller's
POINTERS = ("A", "A_IN", "A_PACKED", "B", "B_IN", "B_PACKED", "C", "C_IN", "C_PACKED", "WS")
FLOATS = ("alpha", "beta")
INTS = ("M", "N", "K", "lda", "ldb", "ldc", "N_k", "lda_k", "ldb_k", "ldc_k")
INTS += ("pitch_a", "pitch_b", "pitch_c", "tail_first")
LONGS = ("stride_a", "stride_b", "stride_c")  # a batched kernel's strides between matrices, in floats
TENSOR_MAPS = ("TMAP_A", "TMAP_B")  # the SGEMM kernel's last arguments where the plan has tensor maps
TENSOR_MAP_BYTES = 128
BATCH_GRID_MAX = 65535  # grid z: a longer batch is launched in pieces this long


@dataclass(frozen=True)
class Step:
    """One kernel launch of the sequence (expressions as text, the config folded in)."""

    kernel: str  # suffix of the kernel's name: "" for the SGEMM kernel
    when: str
    grid: tuple[str, str, str]
    block: int
    dynamic_smem: bool  # the family's dynamic shared memory (helpers use none)
    args: tuple[str, ...]
    beta_only: bool = False  # runs only when beta != 0 (the plan is the shape's; beta is the call's)


@dataclass(frozen=True)
class Geometry:
    """One config's launch at one shape: every launch value and the launches that run."""

    values: Mapping[str, int]
    launches: tuple[tuple[Step, tuple[int, int, int]], ...]  # (step, grid), in order
    block: int
    dynamic_smem: int
    has_workspace: bool  # the SGEMM kernel takes a workspace argument

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.values["grid_x"], self.values["grid_y"], self.values["grid_z"])

    def __getattr__(self, name: str) -> int:  # scale_c, ws_bytes, pitch_b, tail_tiles, ...
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def kernels(self) -> list[str]:
        return [step.kernel for step, _ in self.launches]


@dataclass(frozen=True)
class LaunchPlan:
    """Everything about launching one config short of the shape and the device.

    Plain text and numbers, so it pickles to the GPU worker (which knows SLOTS once it loads).
    """

    env: tuple[tuple[str, int | str], ...]  # params and derived values
    values: tuple[tuple[str, str], ...]  # every launch value in order (expression text)
    host: frozenset[str]  # those a launch reads (the others, e.g. a rule only device code applies, are left out)
    steps: tuple[Step, ...]  # the steps this config can take (expression text)
    block: int
    dynamic_smem: int
    has_workspace: bool  # the SGEMM kernel takes a workspace argument
    packs_b: bool  # B may be packed to a 16-byte pitch first
    packs_c: bool  # C may be written through a copy at a 16-byte pitch
    needs_slots: bool  # a launch value reads SLOTS (resident blocks on the device)
    # Boxes of the tensor maps of A and B ((floats along a stored row, rows) each); None: no maps.
    tensor_maps: tuple[tuple[int, int], tuple[int, int]] | None = None
    packs_a: bool = False  # A may be packed to a 16-byte pitch first (as stored: K x M with TRANS_A, else M x K)
    # (rows, columns) of C one block computes, as the family's YAML declares it (`model: tile`,
    # kernels/tiles.py); what dispatch/model.py pads the problem to. None: the family has no YAML.
    tile: tuple[int, int] | None = None

    @property
    def kernels(self) -> tuple[str, ...]:
        """Return the suffixes of the kernels the module must hold."""
        return tuple(dict.fromkeys(s.kernel for s in self.steps))

    @property
    def has_tail(self) -> bool:
        return "_tail" in self.kernels

    @functools.cached_property
    def batched(self) -> bool:
        """Whether the SGEMM kernel runs a strided batch, one matrix per blockIdx.z."""
        return bool(dict(self.env).get("BATCHED", 0))

    @functools.cached_property
    def layout(self) -> tuple[int, int]:
        """Return (TRANS_A, TRANS_B) of the kernel: how it reads A and B as stored."""
        return int(dict(self.env).get("TRANS_A", 0)), int(dict(self.env).get("TRANS_B", 0))

    def contiguous_pitches(self, M: int, N: int, K: int) -> tuple[int, int, int]:
        """Return (lda, ldb, ldc) of contiguous operands in this kernel's layout."""
        ta, tb = self.layout
        return (M if ta else K), (K if tb else N), N

    def tensor_map_shapes(self, M, N, K) -> tuple[tuple, tuple]:
        """Return (floats along a stored row, rows) of A and of B: what their tensor maps cover."""
        ta, tb = self.layout
        return ((M, K) if ta else (K, M)), ((K, N) if tb else (N, K))

    def geometry(self, M: int, N: int, K: int, slots: int | None = None) -> Geometry:
        if slots is None and self.needs_slots:
            raise ValueError("this launch reads SLOTS (resident blocks on the device): pass slots")
        env = dict(self.env) | {"M": M, "N": N, "K": K, "SLOTS": slots or 0}
        values = {}
        for name, text in self.values:
            if name in self.host:
                env[name] = values[name] = int(_parsed(text)(env))
        launches = []
        for step in self.steps:
            if not _parsed(step.when)(env):
                continue
            grid = tuple(int(_parsed(g)(env)) for g in step.grid)
            if all(grid):
                launches.append((step, grid))
        return Geometry(values, tuple(launches), self.block, self.dynamic_smem, self.has_workspace)

    def c_values(self, host_only: bool = False) -> list[tuple[str, str]]:
        """Return the launch values in order as C over M, N, K and SLOTS, the config folded in."""
        env = dict(self.env)
        out = []
        for name, text in self.values:
            c = _parsed(text).to_c(env)
            if c.lstrip("-").isdigit():
                env[name] = int(c)
            if name in self.host or not host_only:
                out.append((name, c))
        return out

    def c_step(self, step: Step) -> tuple[str, tuple[str, str, str]]:
        """Return a step's condition and grid as C over the launch values."""
        env = dict(self.env)
        return _parsed(step.when).to_c(env), tuple(_parsed(g).to_c(env) for g in step.grid)


class BoundedCache:
    """Remember `make(*key)` for the last `maxsize` keys asked, so a shape sweep stays bounded."""

    def __init__(self, make, maxsize: int = 1024):
        self.make, self.maxsize = make, maxsize
        self._cache: dict[tuple, object] = {}

    def __call__(self, *key):
        value = self._cache.get(key)
        if value is None:
            value = self.make(*key)
            if len(self._cache) >= self.maxsize:
                del self._cache[next(iter(self._cache))]  # dicts keep insertion order
            self._cache[key] = value
        return value

    def __len__(self) -> int:
        return len(self._cache)


class GeometryCache(BoundedCache):
    """Cache `plan.geometry` per shape for one loaded kernel.

    Evaluating the plan costs more than a launch's host time; an application calls few shapes often.
    """

    def __init__(self, plan: LaunchPlan, slots: int | None, maxsize: int = 1024):
        self.plan, self.slots = plan, slots
        super().__init__(lambda M, N, K: plan.geometry(M, N, K, slots), maxsize)


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> Expr:
    return Expr.parse(text, "launch expression")


def plan_for(launch: Launch, env: Mapping[str, int | str]) -> LaunchPlan:
    """Return the family's launch declaration for one config (`env`: its params and derived values).

    A step the config never takes (its condition folds to 0 with the config's values) is left out,
    so the module need not hold its kernel.
    """
    config = dict(env)
    named = _named_values(launch)
    block = int(launch.threads(config))
    dynamic_smem = int(config["SMEM_BYTES"]) if int(launch.dynamic_smem(config)) else 0
    maps = None
    if int(launch.tensor_maps(config)):
        maps = tuple((int(box[0](config)), int(box[1](config))) for box in (launch.box_a, launch.box_b))
    steps = _steps(launch, block, bool(config.get("BATCHED", 0)), maps is not None, bool(config.get("TRANS_A", 0)))
    # Fold the config in: the steps it can take, the values those read (a value the config fixes
    # is kept too: it costs nothing), and whether any of them reads SLOTS.
    folded, reads = dict(config), {}
    for name, text in named:
        c = _parsed(text).to_c(folded)
        if c.lstrip("-").isdigit():
            folded[name] = int(c)
        reads[name] = _identifiers(c)
    kept = tuple(s for s in steps if _parsed(s.when).to_c(folded) != "0")
    todo = set().union(*(_identifiers(_parsed(t).to_c(folded)) for s in kept for t in (s.when, *s.grid)))
    todo |= {a for s in kept for a in s.args} | {"ws_bytes", "ws_zeroed", "pack_b", "pack_b_at", "pitch_b"}
    todo |= {"pack_c", "pack_c_at", "pitch_c", "pack_a", "pack_a_at", "pitch_a"}
    needed: set[str] = set()
    while todo:
        name = todo.pop()
        if name in reads and name not in needed:
            needed.add(name)
            todo |= reads[name]
    return LaunchPlan(
        env=tuple(sorted(config.items())),
        values=tuple(named),
        host=frozenset(n for n, _ in named if n in needed or n in folded),
        steps=kept,
        block=block,
        dynamic_smem=dynamic_smem,
        has_workspace=launch.workspace is not None,
        packs_b=launch.pack_b is not None,
        packs_c=launch.pack_c is not None,
        packs_a=launch.pack_a is not None,
        needs_slots=any("SLOTS" in reads[n] for n in needed),
        tensor_maps=maps,
    )


# The values, computed in order at each shape (upper-case ones are the family's own):
#   the family's launch.values, then
#   scale_c     true: C is scaled by beta first (split-K adds into it)
#   ws_bytes    the workspace argument's size in bytes (families that declare one)
#   ws_zeroed   bytes at its start that are zero before the first launch
#   pack_b, pack_c, pack_a   true: B (as K x N: warptile's PACKB 2 transposes B stored N x K), C or
#               A (as stored: K x M with TRANS_A, else M x K) goes through a copy in the workspace at
#               a 16-byte row pitch (C's copied back at the end, and in first when beta != 0)
#   pack_*_at   where in the workspace; pitch_*: that pitch in floats (4 * cdiv(row length, 4))
#   prepare     work items (threads) of the family's operand preparation, 0 for none
#   tail_tiles, tail_first, tail_grid   a split launch's tail (tiles, first tile, blocks)
#   grid_x, grid_y, grid_z              the SGEMM kernel's grid
# The caller's row pitches lda, ldb and ldc are launch arguments, not values: the plan depends on
# the shape only.
def _named_values(launch: Launch) -> list[tuple[str, str]]:
    """Return the launch values in order: the family's own, then the standard ones."""
    named = [(n, e.text) for n, e in launch.values]
    named.append(("scale_c", launch.scale_c_first.text))
    if launch.workspace is not None:
        named += [("ws_bytes", launch.workspace.text), ("ws_zeroed", launch.workspace_zeroed.text)]
    if launch.pack_b is not None:
        named += [("pack_b", launch.pack_b.text), ("pack_b_at", launch.pack_b_at.text), ("pitch_b", "4 * cdiv(N, 4)")]
    if launch.pack_c is not None:  # the kernels then see pitch_c as N: only where B is padded too
        named += [("pack_c", f"({launch.pack_c.text}) and pack_b"), ("pack_c_at", launch.pack_c_at.text)]
        named.append(("pitch_c", "4 * cdiv(N, 4)"))
    if launch.pack_a is not None:
        pitch = "4 * cdiv(M if TRANS_A == 1 else K, 4)"
        named += [("pack_a", launch.pack_a.text), ("pack_a_at", launch.pack_a_at.text), ("pitch_a", pitch)]
    if launch.prepare is not None:
        named.append(("prepare", launch.prepare.text))
    if launch.tail_tiles is not None:
        named += [("tail_tiles", launch.tail_tiles.text), ("tail_first", launch.tail_first.text)]
        named.append(("tail_grid", launch.tail_grid.text))
    return named + [(f"grid_{axis}", g.text) for axis, g in zip("xyz", launch.grid, strict=True)]


# The steps, in order; each runs when its condition is true and its grid is not empty:
#   _pack_c (C to the workspace; only when beta != 0: otherwise the kernels never read C), _scale_c
#   (C *= beta), _pack_b and _pack_a (B and A to the workspace), _prepare (the family's own copy of
#   A and B into the workspace, as its SGEMM kernel reads them: converted, tiled, padded),
#   _scale_tiles (the tail's tiles of C *= beta), the SGEMM kernel, _tail (adding into C), _unpack_c.
# The SGEMM kernel reads A and B through `lda_k` and `ldb_k`: their copies' pitches when packed (`A`
# and `B` then point into the workspace). Every kernel but the copies reads and writes C (the packed
# one when pack_c) through `ldc_k` and sees `N_k` columns: pitch_c when C is packed, else N. So
# pack_c holds only where pack_b does (B's extra columns are then zero: the kernels compute the
# extra columns of C as zeros, and the copy back leaves them out).
# A BATCHED config's SGEMM kernel takes the strides between matrices (stride_a, stride_b,
# stride_c) last and the batch as its grid z (the family's grid z is 1 there, and no other step
# runs: its declaration's constraints say so); the launcher sets that grid z, BATCH_GRID_MAX at
# a time.
# Tensor maps: a family that declares `tensor_maps` (true for a config) gets two more arguments at
# the end of its SGEMM kernel's, TMAP_A and TMAP_B: CUtensorMap descriptors (128 bytes each, passed
# by value) of A and B as stored -- 2-D, of type TF32 (the copy rounds each float to TF32), rows
# `lda` / `ldb` floats apart, the 128-byte swizzle, zeros past the matrix -- with the boxes the plan
# names (floats along a stored row, rows). A tensor map needs 16-byte aligned rows: where A, B, lda
# or ldb do not give them the launcher passes zeros, and the kernel, seeing the same pointers and
# pitches, must not use the maps.
def _steps(launch: Launch, block: int, batched: bool, tensor_maps: bool, a_km: bool = False) -> list[Step]:
    """Return every step the family can take, in order; `a_km`: A is stored K x M."""
    main_args = ("M", "N_k", "K", "alpha", "A", "lda_k", "B", "ldb_k", "beta", "C", "ldc_k")
    main_args += ("WS",) if launch.workspace is not None else ()
    main_args += LONGS if batched else ()
    main_args += TENSOR_MAPS if tensor_maps else ()
    grid = f"min({HELPER_GRID_MAX}, cdiv({{}}, {HELPER_BLOCK}))"
    # The copies' grid (at_each_element): a block per piece of HELPER_ITEMS * HELPER_BLOCK columns
    # of a row, or of as many elements where rows are narrower than a block.
    span, wide = HELPER_BLOCK * HELPER_ITEMS, HELPER_BLOCK
    copies = f"min({HELPER_GRID_MAX}, {{0}} * cdiv({{1}}, {span}) if {{1}} >= {wide} else cdiv({{0}} * {{1}}, {span}))"
    over_c = (copies.format("M", "N"), "1", "1")
    steps = []
    if launch.pack_c is not None:
        args = ("M", "N", "ldc", "pitch_c", "C_IN", "C_PACKED")
        steps.append(Step("_pack_c", "pack_c", over_c, HELPER_BLOCK, False, args, beta_only=True))
    args = ("M", "N_k", "ldc_k", "beta", "C")
    steps.append(Step("_scale_c", "scale_c", over_c, HELPER_BLOCK, False, args))
    if launch.pack_b is not None:
        args = ("K", "N", "ldb", "pitch_b", "B_IN", "B_PACKED")
        # (PACKB 2's transposing _pack_b walks 32 x 32 tiles grid-stride: any grid serves it)
        steps.append(Step("_pack_b", "pack_b", (copies.format("K", "pitch_b"), "1", "1"), HELPER_BLOCK, False, args))
    if launch.pack_a is not None:
        args = (*(("K", "M") if a_km else ("M", "K")), "lda", "pitch_a", "A_IN", "A_PACKED")  # rows, columns as stored
        over_a = (copies.format(args[0], "pitch_a"), "1", "1")
        steps.append(Step("_pack_a", "pack_a", over_a, HELPER_BLOCK, False, args))
    if launch.prepare is not None:
        args = ("M", "N_k", "K", "A", "lda_k", "B", "ldb_k", "WS")
        steps.append(Step("_prepare", "prepare", (grid.format("prepare"), "1", "1"), HELPER_BLOCK, False, args))
    if launch.tail_tiles is not None:
        args = ("M", "N_k", "ldc_k", "beta", "C", "tail_first")
        steps.append(Step("_scale_tiles", "tail_tiles", ("tail_tiles", "1", "1"), HELPER_BLOCK, False, args))
    steps.append(Step("", "1", ("grid_x", "grid_y", "grid_z"), block, True, main_args))
    if launch.tail_tiles is not None:
        steps.append(Step("_tail", "tail_tiles", ("tail_grid", "1", "1"), block, True, (*main_args, "tail_first")))
    if launch.pack_c is not None:
        args = ("M", "N", "pitch_c", "ldc", "C_PACKED", "C_IN")
        steps.append(Step("_unpack_c", "pack_c", over_c, HELPER_BLOCK, False, args))
    return steps


def _identifiers(c_text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", c_text))
