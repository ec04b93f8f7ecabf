"""Kernel families (templates + their declarations), search spaces, and the static filter.

A family is `templates/<name>.cu.j2`. Its first lines are a Jinja comment holding YAML that
declares the parameters (with integer domains), derived values, constraints and launch
geometry, so a template and its rules travel together:

    {#- autotune
    params:   {BM: {domain: [16, 256], doc: ...}, ...}
    derived:  {THREADS: "(BM // TM) * (BN // TN)", SMEM_BYTES: "4 * BK * (BM + BN)"}
    constraints: [{expr: "BM % TM == 0", why: "..."}, ...]
    launch:   {threads: THREADS, grid: [...], dynamic_smem: 0, scale_c_first: 0}
    -#}

Launch expressions may read M, N, K and SLOTS (how many blocks of the compiled kernel the
device holds at once: SMs x occupancy, known only where the kernel is loaded). A family that
declares `launch.workspace` (bytes) takes one more kernel argument, a device buffer of that
size whose first `launch.workspace_zeroed` bytes are zero before its first launch. A family that
declares `launch.pack_b` takes, after that, B's row pitch in floats: where pack_b is true for a
launch, B is first copied into the workspace at byte `launch.pack_b_at` with a pitch of
4 * cdiv(N, 4) (16-byte aligned rows); otherwise the pitch is N.

`launch.values` names sub-expressions (in order; each may read those before it) that the other
launch expressions read. A family that declares `launch.tail_tiles` launches in two parts: the
main kernel over its grid (skipped when that is empty), then `<kernel>_tail` over
`launch.tail_grid` blocks with one more argument, `launch.tail_first` (the first tile it
covers); the tail adds into C, so `<kernel>_scale_tiles(M, N, beta, C, first)` first scales
those `tail_tiles` tiles of C by beta, one 256-thread block per tile. Nothing of the tail runs
when tail_tiles is 0.

A space is `configs/<name>.yaml`: the values to try per parameter, and seeds.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import math
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from .expr import Expr
from .limits import DeviceLimits
from .types import Config, UserError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_DIR = ROOT / "templates"
CONFIG_DIR = ROOT / "configs"
TEMPLATES_ENV = "AUTOTUNE_TEMPLATES"  # extra template folders (os.pathsep-separated), searched first


def template_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(TEMPLATES_ENV, "").split(os.pathsep) if p]
    return extra + [TEMPLATE_DIR]

_FRONT = re.compile(r"\A\{#-?\s*autotune\s*\n(.*?)^\s*-?#\}", re.S | re.M)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_PARAM = re.compile(r"^[A-Z][A-Z0-9_]*$")
_RESERVED = {"M", "N", "K", "SLOTS", "KERNEL_NAME"}
LAUNCH_NAMES = frozenset({"M", "N", "K", "SLOTS"})  # what launch expressions may read beyond the config


@dataclass(frozen=True)
class LaunchPlan:
    """How to launch one config, short of the shape and the device: picklable, so it crosses to
    the GPU worker, which knows SLOTS once the kernel is loaded."""

    env: tuple[tuple[str, int], ...]  # params and derived values
    grid: tuple[str, str, str]
    block: int
    dynamic_smem: int
    scale_c_first: str
    workspace: str | None  # None: the kernel takes no workspace argument
    workspace_zeroed: str = "0"
    pack_b: str | None = None  # None: the kernel takes no pitch argument for B
    pack_b_at: str = "0"
    values: tuple[tuple[str, str], ...] = ()  # named sub-expressions, in order
    tail_tiles: str | None = None  # None: no tail kernel
    tail_first: str = "0"
    tail_grid: str = "0"

    @property
    def has_tail(self) -> bool:
        """Whether this config launches a tail kernel at some shape (its tail_tiles is not 0 by
        the config alone): only then does its module hold `<kernel>_tail`."""
        if self.tail_tiles is None:
            return False
        env, _ = fold_values(self.values, dict(self.env))
        return _parsed(self.tail_tiles).to_c(env) != "0"

    @property
    def needs_slots(self) -> bool:
        env, values = fold_values(self.values, dict(self.env))
        texts = [*self.grid, self.scale_c_first, self.workspace or "0", self.workspace_zeroed,
                 self.pack_b or "0", self.pack_b_at]
        if self.has_tail:
            texts += [self.tail_tiles, self.tail_first, self.tail_grid]
        # After folding this config's values (a value left over is C text already).
        return any("SLOTS" in c for _, c in values) or any("SLOTS" in _parsed(t).to_c(env) for t in texts)

    def geometry(self, M: int, N: int, K: int, slots: int | None = None) -> dict[str, Any]:
        """Grid, block, shared memory, prologue and workspace bytes for one launch."""
        if slots is None and self.needs_slots:
            raise ValueError("this launch reads SLOTS (resident blocks on the device): pass slots")
        env = dict(self.env) | {"M": M, "N": N, "K": K, "SLOTS": slots or 0}
        for vname, text in self.values:
            env[vname] = int(_parsed(text)(env))
        tail = int(_parsed(self.tail_tiles)(env)) if self.has_tail else 0
        return {
            "tail_tiles": tail,
            "tail_first": int(_parsed(self.tail_first)(env)) if tail else 0,
            "tail_grid": int(_parsed(self.tail_grid)(env)) if tail else 0,
            "grid": tuple(int(_parsed(g)(env)) for g in self.grid),
            "block": self.block,
            "dynamic_smem": self.dynamic_smem,
            "scale_c_first": bool(_parsed(self.scale_c_first)(env)),
            "workspace_bytes": None if self.workspace is None else int(_parsed(self.workspace)(env)),
            "workspace_zeroed": int(_parsed(self.workspace_zeroed)(env)),
            "pack_b": None if self.pack_b is None else bool(_parsed(self.pack_b)(env)),
            "pack_b_at": int(_parsed(self.pack_b_at)(env)),
        }


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> Expr:
    return Expr.parse(text, "launch expression")


def fold_values(values: Iterable[tuple[str, str]], env: dict[str, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Launch values a config fixes, folded into `env` (returned); the rest, as C over the shape
    and SLOTS, in order."""
    rest = []
    for vname, text in values:
        c = _parsed(text).to_c(env)
        if c.lstrip("-").isdigit():
            env[vname] = int(c)
        else:
            rest.append((vname, c))
    return env, rest


@dataclass(frozen=True)
class Constraint:
    """A named rule over a config; `check` returns None or the reason it fails."""

    label: str
    names: frozenset[str]  # template names (params or derived) it reads
    check: Callable[[Mapping[str, int], DeviceLimits], str | None]


def _template_constraint(expr: Expr, why: str) -> Constraint:
    def check(env: Mapping[str, int], _limits: DeviceLimits) -> str | None:
        if expr(env):
            return None
        values = ", ".join(f"{n}={env[n]}" for n in sorted(expr.names))
        return f"{why} ({expr.text}; {values})"

    return Constraint(expr.text, expr.names, check)


def _device_constraints() -> list[Constraint]:
    """The rules every family obeys, over its declared THREADS and SMEM_BYTES."""

    def threads_max(env, lim):
        t = env["THREADS"]
        return None if t <= lim.max_threads_per_block else f"threads {t} > {lim.max_threads_per_block} per block"

    def threads_warp(env, lim):
        t = env["THREADS"]
        return None if t % lim.warp_size == 0 else f"threads {t} not a multiple of the warp size {lim.warp_size}"

    def smem(env, lim):
        s, dyn = env["SMEM_BYTES"], env["DYNAMIC_SMEM"]
        cap = lim.smem_per_block_optin if dyn else lim.smem_per_block
        kind = "dynamic (opt-in)" if dyn else "static"
        return None if s <= cap else f"smem_bytes {s} > {cap} ({kind} limit)"

    return [
        Constraint("threads per block <= device limit", frozenset({"THREADS"}), threads_max),
        Constraint("threads per block a warp multiple", frozenset({"THREADS"}), threads_warp),
        Constraint("shared memory <= device limit", frozenset({"SMEM_BYTES", "DYNAMIC_SMEM"}), smem),
    ]


def resource_violations(registers: int, spill_bytes: int, threads: int, limits: DeviceLimits) -> list[str]:
    """The post-compile part of the static filter (from the ptxas report)."""
    out = []
    if spill_bytes:
        out.append(f"spills {spill_bytes} bytes to local memory")
    if registers * threads > limits.regs_per_block:
        out.append(f"registers {registers} x threads {threads} = {registers * threads} > {limits.regs_per_block}")
    return out


@dataclass
class Family:
    """A kernel template and what it declares."""

    name: str
    path: Path
    description: str
    params: dict[str, tuple[int, int]]  # name -> inclusive domain
    docs: dict[str, str]
    defaults: dict[str, int]  # params a stored config may omit (added to the family later)
    derived: dict[str, Expr]
    constraints: list[Constraint]
    launch: dict[str, Any]

    @classmethod
    def load(cls, name: str, template_dir: Path | None = None) -> "Family":
        if not _NAME.match(name):
            raise UserError(f"family {name!r}: names are lower-case letters, digits and '_'")
        dirs = [Path(template_dir)] if template_dir else template_dirs()
        path = next((d / f"{name}.cu.j2" for d in dirs if (d / f"{name}.cu.j2").is_file()), None)
        if path is None:
            raise UserError(f"unknown family {name!r}; known: {', '.join(known_families(template_dir))}")
        text = path.read_text()
        m = _FRONT.match(text)
        if not m:
            raise UserError(f"{path}: no '{{#- autotune' declaration block at the top")
        try:
            decl = yaml.safe_load(m.group(1))
        except yaml.YAMLError as exc:
            raise UserError(f"{path}: declaration is not valid YAML: {_yaml_reason(exc)}") from None
        where = str(path)
        params, docs, defaults = {}, {}, {}
        for pname, spec in (decl.get("params") or {}).items():
            if not _PARAM.match(pname) or pname in _RESERVED:
                raise UserError(f"{where}: parameter name {pname!r} must be UPPER_CASE and not {sorted(_RESERVED)}")
            lo, hi = spec["domain"]
            params[pname] = (int(lo), int(hi))
            docs[pname] = spec.get("doc", "")
            if "default" in spec:
                defaults[pname] = int(spec["default"])
                if not lo <= defaults[pname] <= hi:
                    raise UserError(f"{where}: default of {pname} is outside its domain [{lo}, {hi}]")
        derived = {k: Expr.parse(v, f"{where} derived {k}") for k, v in (decl.get("derived") or {}).items()}
        for need in ("THREADS", "SMEM_BYTES"):
            if need not in derived:
                raise UserError(f"{where}: derived values must define {need}")
        derived.setdefault("DYNAMIC_SMEM", Expr.parse(str(decl.get("launch", {}).get("dynamic_smem", 0))))
        constraints = [
            _template_constraint(Expr.parse(c["expr"], f"{where} constraint"), c.get("why", c["expr"]))
            for c in decl.get("constraints") or []
        ]
        fam = cls(name, path, decl.get("description", ""), params, docs, defaults, derived,
                  constraints + _device_constraints(), decl.get("launch") or {})
        fam._check_names(where)
        return fam

    def _check_names(self, where: str) -> None:
        known = set(self.params) | set(self.derived)
        for dname, ex in self.derived.items():
            if ex.names - known:
                raise UserError(f"{where}: derived {dname} reads unknown {sorted(ex.names - known)}")
        for c in self.constraints:
            if c.names - known:
                raise UserError(f"{where}: constraint {c.label!r} reads unknown {sorted(c.names - known)}")
        if len(self.launch.get("grid", [])) != 3:
            raise UserError(f"{where}: launch.grid must list three expressions (x, y, z)")
        # Parsed once here: a typo fails when the family loads, not at its first launch.
        launch_known = known | LAUNCH_NAMES
        values = self.launch.get("values") or {}
        if not isinstance(values, dict):
            raise UserError(f"{where}: launch.values must map names to expressions")
        self.value_exprs: dict[str, Expr] = {}
        for vname, text in values.items():
            if not _PARAM.match(str(vname)) or vname in known | LAUNCH_NAMES:
                raise UserError(f"{where}: launch value {vname!r} must be UPPER_CASE and not a parameter, "
                                f"derived value or {sorted(LAUNCH_NAMES)}")
            ex = Expr.parse(str(text), f"{where} launch.values.{vname}")
            if ex.names - launch_known:
                raise UserError(f"{where}: launch value {vname} reads unknown {sorted(ex.names - launch_known)}")
            self.value_exprs[vname] = ex
            launch_known = launch_known | {vname}

        def parse(key: str, text) -> Expr | None:
            if text is None:
                return None
            ex = Expr.parse(str(text), f"{where} launch.{key}")
            if ex.names - launch_known:
                raise UserError(f"{where}: launch.{key} reads unknown {sorted(ex.names - launch_known)}")
            return ex

        self.grid_exprs = [parse("grid", g) for g in self.launch["grid"]]
        self.threads_expr = parse("threads", self.launch.get("threads", "THREADS"))
        self.scale_expr = parse("scale_c_first", self.launch.get("scale_c_first", 0))
        self.workspace_expr = parse("workspace", self.launch.get("workspace"))
        self.workspace_zeroed_expr = parse("workspace_zeroed", self.launch.get("workspace_zeroed", 0))
        self.pack_b_expr = parse("pack_b", self.launch.get("pack_b"))
        self.pack_b_at_expr = parse("pack_b_at", self.launch.get("pack_b_at", 0))
        if self.pack_b_expr is not None and self.workspace_expr is None:
            raise UserError(f"{where}: launch.pack_b needs launch.workspace (the packed B lives there)")
        self.tail_tiles_expr = parse("tail_tiles", self.launch.get("tail_tiles"))
        self.tail_first_expr = parse("tail_first", self.launch.get("tail_first", 0))
        self.tail_grid_expr = parse("tail_grid", self.launch.get("tail_grid", 0))

    @cached_property
    def source(self) -> str:
        return self.path.read_text()

    @cached_property
    def fingerprint(self) -> str:
        """A hash of the template and the templates it includes: a measurement taken with other
        template text is of other code."""
        h = hashlib.sha1()
        todo, seen = [(self.path.name, self.source)], set()
        while todo:
            name, text = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            h.update(name.encode() + b"\0" + text.encode() + b"\0")
            for inc in re.findall(r"{%-?\s*include\s+[\"']([^\"']+)[\"']", text):
                # Where render.environment's loader finds it: beside the template, then built in.
                found = next((d / inc for d in (self.path.parent, TEMPLATE_DIR) if (d / inc).is_file()), None)
                if found is not None:
                    todo.append((inc, found.read_text()))
        return h.hexdigest()[:10]

    def derive(self, params: Mapping[str, int]) -> dict[str, int]:
        """Params (declared defaults for those left out) plus every derived value (in declaration order)."""
        env = {**self.defaults, **params}
        for dname, ex in self.derived.items():
            env[dname] = int(ex(env))
        return env

    def violations(self, config: Config, limits: DeviceLimits) -> list[str]:
        """Every static (pre-compile) rule this config breaks, each with its reason."""
        env = self.derive(config.as_dict())
        return [r for c in self.constraints if (r := c.check(env, limits))]

    def validate_params(self, params: Mapping[str, Any], where: str) -> dict[str, int]:
        """Integers from the declared domains, every parameter present, nothing else."""
        unknown = set(params) - set(self.params)
        if unknown:
            raise UserError(f"{where}: unknown parameter {sorted(unknown)[0]!r} for family {self.name} "
                            f"(has {', '.join(self.params)})")
        params = {**self.defaults, **params}
        missing = [p for p in self.params if p not in params]
        if missing:
            raise UserError(f"{where}: missing parameter {missing[0]!r} for family {self.name}")
        return {p: self.check_value(p, params[p], where) for p in self.params}

    def check_value(self, pname: str, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where}: {pname} must be an integer, got {value!r}")
        lo, hi = self.params[pname]
        if not lo <= value <= hi:
            raise UserError(f"{where}: {pname}={value} is outside its domain [{lo}, {hi}]")
        return value

    def launch_plan(self, config: Config) -> LaunchPlan:
        """Everything about launching `config` that does not depend on the shape or device."""
        env = self.derive(self.validate_params(config.as_dict(), config.name))
        return LaunchPlan(
            env=tuple(sorted(env.items())),
            grid=tuple(g.text for g in self.grid_exprs),
            block=int(self.threads_expr(env)),
            dynamic_smem=env["SMEM_BYTES"] if env["DYNAMIC_SMEM"] else 0,
            scale_c_first=self.scale_expr.text,
            workspace=None if self.workspace_expr is None else self.workspace_expr.text,
            workspace_zeroed=self.workspace_zeroed_expr.text,
            pack_b=None if self.pack_b_expr is None else self.pack_b_expr.text,
            pack_b_at=self.pack_b_at_expr.text,
            values=tuple((k, v.text) for k, v in self.value_exprs.items()),
            tail_tiles=None if self.tail_tiles_expr is None else self.tail_tiles_expr.text,
            tail_first=self.tail_first_expr.text,
            tail_grid=self.tail_grid_expr.text,
        )

    def launch_geometry(self, config: Config, M: int, N: int, K: int, slots: int | None = None) -> dict[str, Any]:
        """Grid, block, shared memory, prologue and workspace for one launch of this config;
        `slots` (resident blocks on the device) is needed where the launch reads SLOTS."""
        return self.launch_plan(config).geometry(M, N, K, slots)


def known_families(template_dir: Path | None = None) -> list[str]:
    dirs = [Path(template_dir)] if template_dir else template_dirs()
    return sorted({p.name[: -len(".cu.j2")] for d in dirs for p in d.glob("*.cu.j2") if not p.name.startswith("_")})


def read_yaml(path: Path) -> Any:
    """A YAML file through safe_load; a missing file or bad YAML is one UserError naming it."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: malformed YAML: {_yaml_reason(exc)}") from None


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{problem} at line {mark.line + 1}" if mark else problem


@dataclass
class Enumeration:
    valid: list[Config]
    total: int
    rejected: collections.Counter = field(default_factory=collections.Counter)  # label -> points removed

    def top_reasons(self, n: int = 3) -> list[tuple[str, int]]:
        return self.rejected.most_common(n)


@dataclass
class Space:
    """What to try for one family: value lists per parameter, and seeds (tried first)."""

    family: Family
    values: dict[str, list[int]]
    seeds: list[Config]
    source: str = ""

    @classmethod
    def load(cls, family: str | Family, path: Path | None = None) -> "Space":
        fam = family if isinstance(family, Family) else Family.load(family)
        if path is None:  # configs/<name>.yaml, or <name>.yaml beside a template from elsewhere
            path = CONFIG_DIR / f"{fam.name}.yaml"
            if not path.is_file() and (fam.path.parent / f"{fam.name}.yaml").is_file():
                path = fam.path.parent / f"{fam.name}.yaml"
        path = Path(path)
        return cls.from_dict(fam, read_yaml(path), str(path))

    @classmethod
    def from_dict(cls, fam: Family, data: Any, where: str) -> "Space":
        if not isinstance(data, dict):
            raise UserError(f"{where}: expected a mapping with 'space' (and optional 'seeds', 'family')")
        extra = set(data) - {"family", "space", "seeds", "description"}
        if extra:
            raise UserError(f"{where}: unknown key {sorted(map(str, extra))[0]!r} (allowed: family, space, seeds)")
        if data.get("family", fam.name) != fam.name:
            raise UserError(f"{where}: file is for family {data['family']!r}, not {fam.name!r}")
        raw = data.get("space")
        if not isinstance(raw, dict) or not raw:
            raise UserError(f"{where}: 'space' must map each parameter to a list of integers")
        values: dict[str, list[int]] = {}
        for pname, vals in raw.items():
            if pname not in fam.params:
                raise UserError(f"{where}: unknown parameter {pname!r} for family {fam.name} "
                                f"(has {', '.join(fam.params)})")
            if not isinstance(vals, list):
                vals = [vals]
            if not vals:
                raise UserError(f"{where}: {pname} has no values")
            values[pname] = sorted({fam.check_value(pname, v, where) for v in vals})
        for pname, default in fam.defaults.items():
            values.setdefault(pname, [default])  # a space written before the parameter existed
        missing = [p for p in fam.params if p not in values]
        if missing:
            raise UserError(f"{where}: space is missing parameter {missing[0]!r}")
        values = {p: values[p] for p in fam.params}  # declaration order drives pruning
        seeds = []
        for i, seed in enumerate(data.get("seeds") or []):
            if not isinstance(seed, dict):
                raise UserError(f"{where}: seed #{i + 1} must be a mapping of parameters")
            seeds.append(Config.make(fam.name, fam.validate_params(seed, f"{where} seed #{i + 1}")))
        return cls(fam, values, seeds, where)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values.values())

    def enumerate(self, limits: DeviceLimits) -> Enumeration:
        """All statically valid points, with how many points each rule removed.

        Depth-first over the parameters in declaration order; each rule is checked as soon as
        every parameter it reads is fixed, so a whole subtree is cut at once (and counted
        against the first rule that cut it).
        """
        fam, order = self.family, list(self.values)
        depth_of = {p: i for i, p in enumerate(order)}
        deps: dict[str, set[str]] = {p: {p} for p in order}
        for dname, ex in fam.derived.items():
            deps[dname] = set().union(*(deps[n] for n in ex.names)) if ex.names else set()
        def level(names: Iterable[str]) -> int:
            return max((depth_of[p] for n in names for p in deps[n]), default=0)
        derived_at = collections.defaultdict(list)
        for dname, ex in fam.derived.items():
            derived_at[level(ex.names)].append((dname, ex))
        rules_at = collections.defaultdict(list)
        for c in fam.constraints:
            rules_at[level(c.names)].append(c)
        below = [math.prod(len(self.values[p]) for p in order[i + 1:]) for i in range(len(order))]
        valid: list[Config] = []
        rejected: collections.Counter = collections.Counter()
        env: dict[str, int] = {}

        def walk(d: int) -> None:
            pname = order[d]
            for v in self.values[pname]:
                env[pname] = v
                for dname, ex in derived_at[d]:
                    env[dname] = int(ex(env))
                failed = next((c for c in rules_at[d] if c.check(env, limits)), None)
                if failed is not None:
                    rejected[failed.label] += below[d]
                elif d + 1 == len(order):
                    valid.append(Config.make(fam.name, {p: env[p] for p in order}))
                else:
                    walk(d + 1)

        walk(0)
        return Enumeration(valid, self.size, rejected)

    def describe_empty(self, en: Enumeration) -> str:
        reasons = "; ".join(f"{label!r} removed {n}" for label, n in en.top_reasons())
        return f"family {self.family.name}: no valid point among {en.total} ({self.source}); {reasons}"
