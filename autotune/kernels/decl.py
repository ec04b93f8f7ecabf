"""A kernel family's declaration: the YAML at the top of its template, checked against a schema.

The schema is the comment above `_TOP`. Unknown keys, duplicate keys, a text where an integer
belongs and names an expression cannot read are errors that name the template and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..core import yamlio
from ..core.types import UserError
from .expr import Expr

_PARAM = re.compile(r"^[A-Z][A-Z0-9_]*$")
_CHOICE = re.compile(r"^[a-z][a-z0-9_]*$")
RESERVED = frozenset({"M", "N", "K", "SLOTS", "KERNEL_NAME"})
LAUNCH_NAMES = frozenset({"M", "N", "K", "SLOTS"})  # what launch expressions may read beyond the config

# The declaration's schema, a Jinja comment at the top of the template:
#
#     {#- autotune
#     description: ...
#     params:      {NAME: {domain: [lo, hi] | choices: [a, b, ...], default: ..., doc: ..., was: ...}}
#     derived:     {NAME: expression}            # in order; THREADS and SMEM_BYTES are required
#     constraints: [{expr: ..., why: ...}]
#     suits:       [{expr: ..., why: ...}]       # shapes (M, N, K) the family is meant for
#     launch:      {threads, grid, dynamic_smem, scale_c_first, workspace, workspace_zeroed,
#                   pack_a, pack_a_at, pack_b, pack_b_at, pack_c, pack_c_at, prepare, values, tail_tiles, tail_first,
#                   tail_grid, tensor_maps, box_a, box_b}
#     arch:        sm_90a                        # optional: the one target it compiles for
#     -#}
_TOP = ("description", "params", "derived", "constraints", "suits", "launch", "arch")
# `arch` names a family built on architecture-specific instructions (wgmma, setmaxnreg: sm_90a):
# it compiles for that target, and only a device of that architecture (sm_90 for sm_90a) runs it;
# the static filter rejects it elsewhere. Without it a family compiles for the device's own arch.
_ARCH = re.compile(r"^sm_[0-9]+a$")  # an architecture-specific target
# `suits` names the shapes a family is built for (`M <= 32`: a few rows). Every family is correct
# at every shape; a search over all families leaves out the ones a shape does not suit, and one
# that names a family runs it anyway.
SHAPE_NAMES = frozenset({"M", "N", "K"})  # what `suits` may read
_PARAM_KEYS = ("domain", "choices", "default", "doc", "was")
_LAUNCH_KEYS = (
    "threads",
    "grid",
    "dynamic_smem",
    "scale_c_first",
    "workspace",
    "workspace_zeroed",
    "pack_a",
    "pack_a_at",
    "pack_b",
    "pack_b_at",
    "pack_c",
    "pack_c_at",
    "prepare",
    "values",
    "tail_tiles",
    "tail_first",
    "tail_grid",
    "tensor_maps",
    "box_a",
    "box_b",
)

Value = int | str


@dataclass(frozen=True)
class Param:
    """One template parameter: an integer in [lo, hi], or one of named choices."""

    # With choices, values are those names (as in `SCHEDULE: stream_k`); `was` maps an older,
    # integer-coded parameter onto the choices, so stored configs that predate the name stay valid.

    name: str
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()
    default: Value | None = None
    doc: str = ""
    was: tuple[str, tuple[str, ...]] | None = None  # (old integer parameter, choice of each old value)

    def check(self, value: Any, where: str) -> Value:
        """Return `value` if it belongs to this parameter, else raise a UserError naming `where`."""
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return value
            raise UserError(f"{where}: {self.name} must be one of {', '.join(self.choices)}, got {yamlio.shown(value)}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where}: {self.name} must be an integer, got {yamlio.shown(value)}")
        if not self.lo <= value <= self.hi:
            raise UserError(f"{where}: {self.name}={yamlio.shown(value)} is outside its domain [{self.lo}, {self.hi}]")
        return value

    def ordered(self, values) -> list[Value]:
        """Return the distinct values in the order neighbours are taken in.

        Integers ascend; choices keep the order they were declared in.
        """
        present = set(values)
        if self.choices:
            return [c for c in self.choices if c in present]
        return sorted(present)


@dataclass(frozen=True)
class Launch:
    """How the family launches, as expressions over the config, M, N, K, SLOTS and `values`."""

    threads: Expr
    grid: tuple[Expr, Expr, Expr]
    dynamic_smem: Expr
    scale_c_first: Expr
    workspace: Expr | None  # None: the kernel takes no workspace argument
    workspace_zeroed: Expr
    pack_a: Expr | None  # None: A is always read in place
    pack_a_at: Expr
    pack_b: Expr | None  # None: the kernel takes no pitch argument for B
    pack_b_at: Expr
    pack_c: Expr | None  # None: C is always written in place
    pack_c_at: Expr
    prepare: Expr | None  # None: no operand preparation; else its work items (threads)
    values: tuple[tuple[str, Expr], ...]  # named sub-expressions, in order
    tail_tiles: Expr | None  # None: no tail kernel
    tail_first: Expr
    tail_grid: Expr
    # A config expression: true -- the SGEMM kernel's last two arguments are tensor maps of A and B
    # as stored (launch.py, "Tensor maps"), with boxes (floats along a stored row, rows).
    tensor_maps: Expr
    box_a: tuple[Expr, Expr] | None
    box_b: tuple[Expr, Expr] | None


@dataclass(frozen=True)
class Declaration:
    description: str
    params: dict[str, Param]
    derived: dict[str, Expr]
    constraints: tuple[tuple[Expr, str], ...]
    launch: Launch
    suits: tuple[tuple[Expr, str], ...] = ()  # over M, N, K: the shapes the family is meant for
    arch: str | None = None  # e.g. "sm_90a": the only target it compiles for (None: the device's)


def parse(text: str, path: str, first_line: int) -> Declaration:
    """The declaration block's YAML text (starting at `first_line` of the template `path`)."""
    data = yamlio.parse(text, path, first_line)
    yamlio.check_keys(data, _TOP, path, "the declaration")
    params = _params(data.get("params"), path)
    known = set(params)
    derived = {}
    raw_derived = data.get("derived") or yamlio.Mapping()
    if not isinstance(raw_derived, dict):
        raise UserError(f"{yamlio.where(path, data, 'derived')}: derived must map names to expressions")
    for dname, text_ in raw_derived.items():
        at = yamlio.where(path, raw_derived, dname)
        if not isinstance(dname, str) or not _PARAM.match(dname) or dname in RESERVED | known:
            raise UserError(
                f"{at}: derived name {yamlio.shown(dname)} must be UPPER_CASE and not a parameter or {sorted(RESERVED)}"
            )
        derived[dname] = _expr(text_, at, f"derived {dname}", known)
        known.add(dname)
    for need in ("THREADS", "SMEM_BYTES"):
        if need not in derived:
            raise UserError(f"{path}: derived values must define {need}")
    constraints = _rules(data, "constraints", path, known)
    suits = _rules(data, "suits", path, SHAPE_NAMES)
    if "launch" not in data:
        raise UserError(f"{path}: the declaration needs a 'launch' block (at least its grid)")
    launch = _launch(data["launch"], path, known)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise UserError(f"{yamlio.where(path, data, 'description')}: description must be text")
    arch = data.get("arch")
    if arch is not None and not (isinstance(arch, str) and _ARCH.match(arch)):
        at = yamlio.where(path, data, "arch")
        raise UserError(f"{at}: arch must name an architecture-specific target such as sm_90a")
    return Declaration(description.strip(), params, derived, constraints, launch, suits, arch)


def _rules(data: Any, key: str, path: str, names: set[str] | frozenset[str]) -> tuple[tuple[Expr, str], ...]:
    """A list of {expr, why} (constraints over the config, suits over the shape)."""
    raw = data.get(key) or []
    if not isinstance(raw, list):
        raise UserError(f"{yamlio.where(path, data, key)}: {key} must be a list of {{expr, why}}")
    out = []
    for c in raw:
        what = "a constraint" if key == "constraints" else f"an entry of {key}"
        yamlio.check_keys(c, ("expr", "why"), path, what)
        if "expr" not in c:
            raise UserError(f"{yamlio.where(path, c)}: {what} needs 'expr'")
        why = c.get("why", str(c["expr"]))
        if not isinstance(why, str):
            raise UserError(f"{yamlio.where(path, c, 'why')}: 'why' must be text")
        out.append((_expr(c["expr"], yamlio.where(path, c, "expr"), key.rstrip("s"), names), why))
    return tuple(out)


def _params(raw: Any, path: str) -> dict[str, Param]:
    if raw is None:
        raise UserError(f"{path}: the declaration needs 'params'")
    if not isinstance(raw, dict):
        raise UserError(f"{path}: params must map each parameter to its domain")
    out = {}
    for pname, spec in raw.items():
        at = yamlio.where(path, raw, pname)
        if not isinstance(pname, str) or not _PARAM.match(pname) or pname in RESERVED:
            raise UserError(f"{at}: parameter name {yamlio.shown(pname)} must be UPPER_CASE and not {sorted(RESERVED)}")
        yamlio.check_keys(spec, _PARAM_KEYS, path, f"parameter {pname}")
        doc = spec.get("doc", "")
        if not isinstance(doc, str):
            raise UserError(f"{yamlio.where(path, spec, 'doc')}: doc of {pname} must be text")
        if ("domain" in spec) == ("choices" in spec):
            raise UserError(f"{at}: parameter {pname} needs either 'domain: [lo, hi]' or 'choices: [...]'")
        if "domain" in spec:
            dom = spec["domain"]
            if not (isinstance(dom, list) and len(dom) == 2 and all(_is_int(v) for v in dom) and dom[0] <= dom[1]):
                raise UserError(
                    f"{yamlio.where(path, spec, 'domain')}: domain of {pname} must be [lo, hi], "
                    f"two integers with lo <= hi, got {yamlio.shown(dom)}"
                )
            param = Param(pname, lo=dom[0], hi=dom[1], doc=doc)
        else:
            choices = spec["choices"]
            if not (
                isinstance(choices, list)
                and choices
                and all(isinstance(c, str) and _CHOICE.match(c) for c in choices)
                and len(set(choices)) == len(choices)
            ):
                raise UserError(
                    f"{yamlio.where(path, spec, 'choices')}: choices of {pname} must be distinct "
                    f"lower_case names, got {yamlio.shown(choices)}"
                )
            param = Param(pname, choices=tuple(choices), doc=doc)
        if "default" in spec:
            param = replace(param, default=param.check(spec["default"], yamlio.where(path, spec, "default")))
        if "was" in spec:
            param = replace(param, was=_was(spec["was"], param, path, spec))
        out[pname] = param
    return out


def _was(raw: Any, param: Param, path: str, spec: Any) -> tuple[str, tuple[str, ...]]:
    at = yamlio.where(path, spec, "was")
    if not param.choices or not isinstance(raw, dict) or len(raw) != 1:
        raise UserError(
            f"{at}: 'was' maps one older integer parameter to {param.name}'s choices: "
            f"{{OLD: [choice of 0, choice of 1, ...]}}"
        )
    ((old, names),) = raw.items()
    if (
        not isinstance(old, str)
        or not _PARAM.match(old)
        or not isinstance(names, list)
        or any(n not in param.choices for n in names)
    ):
        raise UserError(f"{at}: 'was' of {param.name} must map an UPPER_CASE name to a list of its choices")
    return old, tuple(names)


def _launch(raw: Any, path: str, known: set[str]) -> Launch:
    yamlio.check_keys(raw, _LAUNCH_KEYS, path, "launch")
    config_names = frozenset(known)
    values, readable = _launch_values(raw, path, known)

    def expr(key: str, default: Any = None, names=None) -> Expr | None:
        if key not in raw and default is None:
            return None
        text = raw.get(key, default)
        return _expr(text, yamlio.where(path, raw, key), f"launch.{key}", readable if names is None else names)

    grid = raw.get("grid")
    if not isinstance(grid, list) or len(grid) != 3:
        raise UserError(f"{yamlio.where(path, raw, 'grid')}: launch.grid must list three expressions (x, y, z)")
    at = yamlio.where(path, raw, "grid")

    def box(key: str) -> tuple[Expr, Expr] | None:
        if key not in raw:
            return None
        pair, where = raw[key], yamlio.where(path, raw, key)
        if not isinstance(pair, list) or len(pair) != 2:
            raise UserError(f"{where}: launch.{key} must list two expressions (floats along a stored row, rows)")
        return tuple(_expr(e, where, f"launch.{key}", config_names) for e in pair)

    launch = Launch(
        threads=expr("threads", "THREADS", config_names),
        grid=tuple(_expr(g, at, "launch.grid", readable) for g in grid),
        dynamic_smem=expr("dynamic_smem", 0, config_names),
        scale_c_first=expr("scale_c_first", 0),
        workspace=expr("workspace"),
        workspace_zeroed=expr("workspace_zeroed", 0),
        pack_a=expr("pack_a"),
        pack_a_at=expr("pack_a_at", 0),
        pack_b=expr("pack_b"),
        pack_b_at=expr("pack_b_at", 0),
        pack_c=expr("pack_c"),
        pack_c_at=expr("pack_c_at", 0),
        prepare=expr("prepare"),
        values=tuple(values),
        tail_tiles=expr("tail_tiles"),
        tail_first=expr("tail_first", 0),
        tail_grid=expr("tail_grid", 0),
        tensor_maps=expr("tensor_maps", 0, config_names),
        box_a=box("box_a"),
        box_b=box("box_b"),
    )
    _check_together(launch, raw, path)
    return launch


def _launch_values(raw: Any, path: str, known: set[str]) -> tuple[list[tuple[str, Expr]], set[str]]:
    """Return launch.values' expressions in order, and every name a launch expression may read."""
    # Each value may read those before it.
    values = []
    raw_values = raw.get("values") or {}
    if not isinstance(raw_values, dict):
        raise UserError(f"{yamlio.where(path, raw, 'values')}: launch.values must map names to expressions")
    readable = set(known) | LAUNCH_NAMES
    for vname, text in raw_values.items():
        at = yamlio.where(path, raw_values, vname)
        if not isinstance(vname, str) or not _PARAM.match(vname) or vname in readable:
            raise UserError(
                f"{at}: launch value {yamlio.shown(vname)} must be UPPER_CASE and not a parameter, derived "
                f"value or {sorted(LAUNCH_NAMES)}"
            )
        values.append((vname, _expr(text, at, f"launch.values.{vname}", readable)))
        readable.add(vname)
    return values, readable


def _check_together(launch: Launch, raw: Any, path: str) -> None:
    """Check the launch keys that only work with others; raise a UserError where one is alone."""
    # Tensor maps go with both boxes, packing and prepared operands with a workspace to live in, a
    # packed C with a packed B.
    if ("tensor_maps" in raw) != (launch.box_a is not None and launch.box_b is not None):
        raise UserError(f"{yamlio.where(path, raw, 'tensor_maps')}: launch.tensor_maps, box_a and box_b go together")
    needs_workspace = (
        ("pack_a", "packed A lives"),
        ("pack_b", "packed B lives"),
        ("pack_c", "packed C lives"),
        ("prepare", "prepared operands live"),
    )
    for key, what in needs_workspace:
        if getattr(launch, key) is not None and launch.workspace is None:
            raise UserError(f"{yamlio.where(path, raw, key)}: launch.{key} needs launch.workspace (the {what} there)")
    if launch.pack_c is not None and launch.pack_b is None:
        raise UserError(
            f"{yamlio.where(path, raw, 'pack_c')}: launch.pack_c needs launch.pack_b (the kernels see C's packed "
            "pitch as N, so B must be padded to it too)"
        )


def _expr(text: Any, at: str, what: str, names: set[str] | frozenset[str]) -> Expr:
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise UserError(f"{at}: {what} must be an integer expression, got {yamlio.shown(text)}")
    ex = Expr.parse(text, f"{at}: {what}")
    if ex.names - set(names):
        raise UserError(f"{at}: {what} reads unknown {sorted(ex.names - set(names))}")
    return ex


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
