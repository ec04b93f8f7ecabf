"""A compiled cubin loaded into the current CUDA context and launched.

It holds the kernels its launch plan names (kernels/launch.py), their arguments in ctypes slots
launched by cuLaunchKernel, and the workspaces the launches use. The runner verifies and times
kernels through it; autotune.matmul calls them through it.
"""

from __future__ import annotations

import ctypes
import itertools
import threading

import cupy as cp
from cupy_backends.cuda.api import driver, runtime

from ..kernels.launch import (
    BATCH_GRID_MAX,
    FLOATS,
    INTS,
    LONGS,
    POINTERS,
    TENSOR_MAPS,
    BoundedCache,
    GeometryCache,
    LaunchPlan,
)
from . import tensor_map


class Workspaces:
    """The device buffers loaded kernels keep between launches, one per (kernel, device, stream).

    `alloc(nbytes, stream)` returns a zeroed buffer with `.nbytes`; `zero(buf, start, stop, stream)`
    zeroes a byte range in stream order. Beyond `budget` bytes the least recently used buffers are
    dropped (their memory goes back in stream order); such a key later gets a new zeroed one.

    A plan's workspace starts with `ws_zeroed` bytes that must be zero when a launch starts
    (stream-K flags, the split sums' tile counters), and every launch leaves them zero; past them lie
    scratch bytes (partial sums, packed operands) that a launch leaves dirty. Both sizes depend on
    the shape, so each buffer remembers how many of its first bytes are known zero (`clean`): a
    launch needing more gets the difference zeroed on its stream first. Launches of one key are
    ordered (one stream) and the caller holds its kernel's lock from `get` to the launch, so this
    bookkeeping is what the device sees.
    """

    def __init__(self, alloc, zero, budget: int):
        self.alloc, self.zero, self.budget = alloc, zero, budget
        self._held: dict[tuple, list] = {}  # key -> [buffer, bytes known zero from its start, captured]
        self.kept: list = []  # dropped buffers a CUDA graph launched with: a replay may come any time
        self._lock = threading.Lock()

    def get(self, key: tuple, nbytes: int, zeroed: int, stream, captured: bool = False):
        """Return `key`'s buffer (at least `nbytes`), its first `zeroed` bytes zero in `stream`.

        `captured`: the launch goes into a CUDA graph (its buffer is then kept).
        """
        if zeroed > nbytes:
            raise ValueError(f"a workspace of {nbytes} bytes cannot start with {zeroed} zero bytes")
        with self._lock:
            held = self._held.pop(key, None)
            if held is None or held[0].nbytes < nbytes:
                self._drop(held)  # the smaller buffer goes before the larger one is made
                buf = self.alloc(max(nbytes, 16), stream)
                held = [buf, buf.nbytes, False]
            elif held[1] < zeroed:
                self.zero(held[0], held[1], zeroed, stream)
            held[1] = zeroed  # what the launch leaves zero; the bytes past it hold its scratch
            held[2] = held[2] or captured
            self._held[key] = held  # most recently used last
            total = sum(h[0].nbytes for h in self._held.values())
            while total > self.budget and len(self._held) > 1:
                total -= self._drop(self._held.pop(next(iter(self._held))))
            return held[0]

    def _drop(self, held: list | None) -> int:
        if held is not None and held[2]:
            self.kept.append(held[0])
        return 0 if held is None else held[0].nbytes

    def clear(self) -> None:
        """Drop every buffer (the next launch of each key gets a new zeroed one)."""
        with self._lock:
            for held in self._held.values():
                self._drop(held)
            self._held.clear()

    def held(self, key: tuple):
        """Return the buffer of `key`, or None (tests look at what a launch left there)."""
        with self._lock:
            held = self._held.get(key)
            return None if held is None else held[0]

    def __len__(self) -> int:
        return len(self._held)


# Loaded kernels' workspaces: one per (kernel uid, device, stream), so a
# kernel's counters never meet another kernel's packed B or partial sums, and two streams
# running one kernel at once never share one.
WORKSPACE_BUDGET_BYTES = 2 << 30


def _alloc_workspace(nbytes: int, stream) -> cp.ndarray:
    with stream:  # allocated and zeroed in order with the launches that use it
        return cp.zeros(nbytes, dtype=cp.uint8)


def _zero_workspace(ws: cp.ndarray, start: int, stop: int, stream) -> None:
    runtime.memsetAsync(ws.data.ptr + start, 0, stop - start, stream.ptr)


def capturing(stream) -> bool:
    """Return whether `stream` (CuPy's) is being captured into a CUDA graph."""
    try:
        return bool(stream.is_capturing())
    except Exception:  # noqa: BLE001 - a stream that cannot say: taken as captured
        return True


WORKSPACES = Workspaces(_alloc_workspace, _zero_workspace, WORKSPACE_BUDGET_BYTES)
_uids = itertools.count()


class LoadedKernel:
    """A compiled cubin loaded into the current CUDA context, ready to launch.

    It holds the kernels its launch plan names, their dynamic shared-memory opt-in, and the
    workspace its launches need.
    """

    def __init__(self, cubin: bytes, kernel: str, plan: LaunchPlan):
        self.plan = plan
        self.module = cp.cuda.function.Module()
        self.module.load(cubin)
        self.fns = {suffix: self.module.get_function(kernel + suffix) for suffix in plan.kernels}
        self.fn = self.fns[""]
        if plan.batched and plan.kernels != ("",):
            raise ValueError(f"a batched kernel launches alone, but this plan has steps {plan.kernels}")
        if plan.dynamic_smem > 48 * 1024:
            for step in plan.steps:
                if step.dynamic_smem:
                    driver.funcSetAttribute(
                        self.fns[step.kernel].ptr,
                        driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        int(plan.dynamic_smem),
                    )
        per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(self.fn.ptr, plan.block, plan.dynamic_smem)
        # Blocks of this kernel the device holds at once: a grid that waits on itself (stream-K)
        # must not be larger.
        self.slots = int(per_sm) * cp.cuda.Device().attributes["MultiProcessorCount"]
        self.geometry = GeometryCache(plan, self.slots)  # geometry(M, N, K) -> Geometry
        self._prepared = BoundedCache(self._prepare)  # (M, N, K, lda, ldb, ldc) -> (geometry, steps, ints)
        self._lock = threading.Lock()
        self._uid = next(_uids)

    def workspace_key(self, stream=None) -> tuple[int, int, int]:
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        return (self._uid, runtime.getDevice(), stream.ptr)

    def launch(
        self,
        M: int,
        N: int,
        K: int,
        a,
        b,
        c,
        alpha: float = 1.0,
        beta: float = 0.0,
        stream=None,
        pitches=None,
        batch: int = 1,
        strides=None,
    ) -> None:
        """Compute C = alpha * op(A) @ op(B) + beta * C: the plan's launches at this shape.

        Args:
            pitches: (lda, ldb, ldc) in floats; None for contiguous operands in the kernel's layout.
            batch: That many products (> 1), the matrices of A, B and C `strides` floats apart (None:
                contiguous); a BATCHED kernel runs them in one launch, another one launch each.
        """
        lda, ldb, ldc = pitches if pitches is not None else self.plan.contiguous_pitches(M, N, K)
        if batch == 1:
            return self._launch(M, N, K, a, b, c, alpha, beta, stream, lda, ldb, ldc)
        sa, sb, sc = strides if strides is not None else (M * K, K * N, M * N)
        a, b, c = _address(a), _address(b), _address(c)  # arrays, or addresses (a shortcut's)
        per = BATCH_GRID_MAX if self.plan.batched else 1
        for first in range(0, batch, per):
            at = (a + 4 * first * sa, b + 4 * first * sb, c + 4 * first * sc)
            n = min(per, batch - first)
            self._launch(M, N, K, *at, alpha, beta, stream, lda, ldb, ldc, (n, sa, sb, sc))

    def _launch(self, M, N, K, a, b, c, alpha, beta, stream, lda, ldb, ldc, batch=None) -> None:
        geo, steps, ints = self._prepared(M, N, K, lda, ldb, ldc)
        pa, pb, pc = _address(a), _address(b), _address(c)
        values = {"A": pa, "A_IN": pa, "B": pb, "B_IN": pb, "C": pc, "C_IN": pc, "alpha": alpha, "beta": beta}
        n = 0  # grid z as planned
        if self.plan.batched:
            n, values["stride_a"], values["stride_b"], values["stride_c"] = batch or (1, 0, 0, 0)
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        # The steps' argument slots are shared, and the workspace's zeroed bytes are what this
        # launch needs only until the next one of this kernel: fill, size and launch as one.
        with self._lock:
            if geo.has_workspace:
                v = geo.values
                if v["ws_bytes"]:
                    key, captured = self.workspace_key(stream), capturing(stream)
                    ws = WORKSPACES.get(key, v["ws_bytes"], v["ws_zeroed"], stream, captured)
                    _place(v, values, ws.data.ptr)
                else:
                    _place(v, values, 0)
            if self.plan.tensor_maps is not None:
                # A and B as the kernel reads them (packed or not)
                maps = self._tensor_maps(M, N, K, values["A"], values["B"], ints["lda_k"], ints["ldb_k"])
                values["TMAP_A"], values["TMAP_B"] = maps
            stream_ptr = stream.ptr
            for step in steps:
                if beta != 0 or not step.beta_only:
                    step.launch(values, stream_ptr, n)

    def recipe(self, M: int, N: int, K: int, pitches: tuple[int, int, int], stream) -> tuple[list, object] | None:
        """Return one product's launches as native.cpp arms them, and a workspace of their own.

        Each step is [fn, grid x, y, z, block, dynamic smem, then kind and value an argument]
        (kinds: NATIVE_KINDS), with beta 0; a BATCHED kernel runs one matrix, as `launch` does.
        None for a plan with tensor maps: it stays on the Python road. The workspace (zeroed in
        `stream`, None if the plan needs none) is the steps' alone: no other launch dirties its
        scratch or its zeroed counters.
        """
        if self.plan.tensor_maps is not None:
            return None
        geo, _, ints = self._prepared(M, N, K, *pitches)
        values = {"A": "A", "A_IN": "A", "B": "B", "B_IN": "B", "C": "C", "C_IN": "C"}
        values.update(dict.fromkeys(LONGS, 0))  # one matrix: a batch of one, grid z 1
        ws = None
        if geo.has_workspace:
            v = geo.values
            ws = _alloc_workspace(v["ws_bytes"], stream) if v["ws_bytes"] else None
            _place(v, values, 0 if ws is None else ws.data.ptr)
        steps = []
        for step, grid in geo.launches:
            if step.beta_only:
                continue
            grid = (grid[0], grid[1], 1) if self.plan.batched else grid
            flat = [self.fns[step.kernel].ptr, *grid, step.block, geo.dynamic_smem if step.dynamic_smem else 0]
            for name in step.args:
                flat += native_arg(name, values.get(name), ints)
            steps.append(flat)
        return steps, ws

    def _tensor_maps(self, M: int, N: int, K: int, a: int, b: int, lda: int, ldb: int):
        """Return the maps of A and B as the SGEMM kernel reads them, or zeros unless both can.

        With zeros the kernel, testing the same pointers and pitches, copies the tiles itself.
        """
        if not (tensor_map.mappable(a, lda) and tensor_map.mappable(b, ldb)):
            return tensor_map.ZEROS, tensor_map.ZEROS
        (ia, oa), (ib, ob) = self.plan.tensor_map_shapes(M, N, K)
        box_a, box_b = self.plan.tensor_maps
        return tensor_map.cached(a, ia, oa, lda, box_a), tensor_map.cached(b, ib, ob, ldb, box_b)

    def _prepare(self, M: int, N: int, K: int, lda: int, ldb: int, ldc: int):
        """Return (geometry, its launches as _Step, the integer arguments) at one shape and pitches.

        Remembered in _prepared: building them costs more host time than a launch at a small shape.
        """
        geo = self.geometry(M, N, K)
        v = geo.values
        ints = dict(M=M, N=N, K=K, lda=lda, ldb=ldb, ldb_k=v["pitch_b"] if v.get("pack_b") else ldb, ldc=ldc)
        ints["lda_k"] = v["pitch_a"] if v.get("pack_a") else lda
        ints["ldc_k"], ints["N_k"] = (v["pitch_c"], v["pitch_c"]) if v.get("pack_c") else (ldc, N)
        ints.update({name: v[name] for name in ("pitch_a", "pitch_b", "pitch_c", "tail_first") if name in v})
        steps = []
        for step, grid in geo.launches:
            smem = geo.dynamic_smem if step.dynamic_smem else 0
            steps.append(_Step(self.fns[step.kernel].ptr, grid, step.block, smem, step.args, ints, step.beta_only))
        return geo, steps, ints


# native.cpp's argument kinds: a constant of a C type, or the call's A, B, C or alpha.
NATIVE_KINDS = {"i32": 0, "i64": 1, "f32": 2, "ptr": 3, "A": 4, "B": 5, "C": 6, "alpha": 7}


def native_arg(name: str, value, ints: dict) -> list[int]:
    """Return [kind, value] of one kernel argument for native.cpp, with beta 0.

    Args:
        name: the argument's name in the launch plan (launch.POINTERS, FLOATS, INTS).
        value: a pointer's: "A", "B" or "C" for the call's operands, else an address; a batch
            stride's (LONGS) in floats.
        ints: the shape's integer arguments.
    """
    if name in INTS:
        return [NATIVE_KINDS["i32"], int(ints[name])]
    if name in LONGS:
        return [NATIVE_KINDS["i64"], int(value)]
    if name == "alpha":
        return [NATIVE_KINDS["alpha"], 0]
    if name == "beta":
        return [NATIVE_KINDS["f32"], 0]  # the bits of 0.0f
    if name in POINTERS and value is not None:
        return [NATIVE_KINDS[value], 0] if isinstance(value, str) else [NATIVE_KINDS["ptr"], int(value)]
    raise ValueError(f"no native argument for {name!r}")


def _place(v: dict, values: dict, ws: int) -> None:
    """Set the workspace's pointer in `values`, and A's, B's and C's where the plan packs them."""
    values["WS"] = ws
    if v.get("pack_a"):
        values["A"] = values["A_PACKED"] = ws + v["pack_a_at"]
    if v.get("pack_b"):
        values["B"] = values["B_PACKED"] = ws + v["pack_b_at"]
    if v.get("pack_c"):
        values["C"] = values["C_PACKED"] = ws + v["pack_c_at"]


def _address(x) -> int:
    """Return a device pointer: a CuPy array's data, or an address already."""
    return x.data.ptr if isinstance(x, cp.ndarray) else int(x)


# Kernel arguments by C type (launch.py's names); the integers of a shape are set once per _Step,
# the others at each launch.
_CTYPES = (
    dict.fromkeys(POINTERS, ctypes.c_uint64)
    | dict.fromkeys(FLOATS, ctypes.c_float)
    | dict.fromkeys(INTS, ctypes.c_int32)
    | dict.fromkeys(LONGS, ctypes.c_int64)
    | dict.fromkeys(TENSOR_MAPS, tensor_map.TensorMap)
)


class _Step:
    """One kernel launch at one shape and pitches, by cuLaunchKernel.

    Its arguments sit in ctypes slots, the array of their addresses made once (the driver copies the
    values at the launch, so the slots can be refilled for the next): several microseconds less host
    time a launch than CuPy's Function call, which converts every argument each time.
    """

    __slots__ = ("beta_only", "block", "fn", "grid", "maps", "params", "per_call", "slots", "smem")

    def __init__(self, fn: int, grid: tuple[int, int, int], block: int, smem: int, names, ints, beta_only=False):
        self.fn, self.grid, self.block, self.smem, self.beta_only = fn, grid, block, smem, beta_only
        self.slots = [_CTYPES[n]() for n in names]  # kept alive: params points into them
        for slot, name in zip(self.slots, names, strict=True):
            if name in INTS:
                slot.value = ints[name]
        per_call = [(slot, name) for slot, name in zip(self.slots, names, strict=True) if name not in INTS]
        self.per_call = [(slot, name) for slot, name in per_call if name not in TENSOR_MAPS]
        self.maps = [(slot, name) for slot, name in per_call if name in TENSOR_MAPS]  # copied in by bytes
        array = (ctypes.c_void_p * len(names))(*(ctypes.addressof(s) for s in self.slots))
        self.params = (array, ctypes.addressof(array))

    def launch(self, values: dict, stream_ptr: int, grid_z: int) -> None:
        for slot, name in self.per_call:
            slot.value = values[name]
        for slot, name in self.maps:
            ctypes.memmove(slot, values[name], ctypes.sizeof(slot))
        gx, gy, gz = self.grid
        driver.launchKernel(self.fn, gx, gy, grid_z or gz, self.block, 1, 1, self.smem, stream_ptr, self.params[1], 0)
