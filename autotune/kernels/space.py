"""Kernel families (templates + their declarations), search spaces, and the static filter.

A family is `templates/<name>.cu.j2`. Its first lines are a Jinja comment holding YAML that
declares the parameters (integer domains or named choices), derived values, constraints and
launch (autotune/kernels/decl.py has the schema; autotune/kernels/launch.py what the launch keys mean), so a
template and its rules travel together:

    {#- autotune
    params:   {BM: {domain: [16, 256], doc: ...}, SCHEDULE: {choices: [a, b], default: a}, ...}
    derived:  {THREADS: "(BM // TM) * (BN // TN)", SMEM_BYTES: "4 * BK * (BM + BN)"}
    constraints: [{expr: "BM % TM == 0", why: "..."}, ...]
    launch:   {threads: THREADS, grid: [...], dynamic_smem: 0, scale_c_first: 0}
    -#}

A space is `configs/<name>.yaml`: the values to try per parameter, seeds (tried first) and a
fallback (a config meant to be correct and decent on every GPU profile, for untuned shapes).
A config is resolved once (`Family.resolve`): validated, defaults filled in, derived values and
launch plan computed; rendering, compiling, running and exporting all read that one object.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import hashlib
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from ..core import yamlio
from ..core.types import LAYOUT_PARAMS, Config, Problem, UserError, name_piece
from . import decl as _decl
from .launch import LaunchPlan, plan_for
from .limits import DeviceLimits

# The folder holding templates/ and configs/: the installed package, when it carries them (a
# wheel: pyproject.toml maps them into it), else the checkout beside the package (an editable
# install or PYTHONPATH=.), whose top-level templates/ and configs/ are the one source of both.
_PACKAGE = Path(__file__).resolve().parent.parent  # autotune/, above this layer's folder
ROOT = _PACKAGE if (_PACKAGE / "templates").is_dir() else _PACKAGE.parent
TEMPLATE_DIR = ROOT / "templates"
CONFIG_DIR = ROOT / "configs"
TEMPLATES_ENV = "AUTOTUNE_TEMPLATES"  # extra template folders (os.pathsep-separated), searched first


def template_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(TEMPLATES_ENV, "").split(os.pathsep) if p]
    for d in extra:
        if not d.is_dir():
            raise UserError(f"{TEMPLATES_ENV}: {d} is not a folder")
    return extra + [TEMPLATE_DIR]


_FRONT = re.compile(r"\A\{#-?\s*autotune\s*\n(.*?)^\s*-?#\}", re.S | re.M)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Constraint:
    """A named rule over a config; `check` returns None or the reason it fails; `holds` only
    whether it passes (the enumeration asks millions of times and needs no reason)."""

    label: str
    names: frozenset[str]  # template names (params or derived) it reads
    check: Callable[[Mapping[str, Any], DeviceLimits], str | None]
    test: Callable[[Mapping[str, Any], DeviceLimits], bool] | None = None

    def holds(self, env: Mapping[str, Any], limits: DeviceLimits) -> bool:
        return self.test(env, limits) if self.test is not None else self.check(env, limits) is None


def _template_constraint(expr, why: str) -> Constraint:
    def check(env: Mapping[str, Any], _limits: DeviceLimits) -> str | None:
        if expr(env):
            return None
        values = ", ".join(f"{n}={env[n]}" for n in sorted(expr.names))
        return f"{why} ({expr.text}; {values})"

    return Constraint(expr.text, expr.names, check, lambda env, _limits: bool(expr(env)))


def _arch_constraint(arch: str) -> Constraint:
    """A family built for an architecture-specific target (sm_90a) runs only on that architecture."""

    def check(_env: Mapping[str, Any], lim: DeviceLimits) -> str | None:
        if lim.arch == arch.removesuffix("a"):
            return None
        return f"needs an {arch.removesuffix('a')} device (built for {arch}: wgmma); this one is {lim.arch}"

    return Constraint(f"arch {arch}", frozenset(), check)


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


@dataclass(frozen=True)
class Resolved:
    """One config of one family, resolved once: every parameter (defaults filled in), the
    derived values and the launch plan. What rendering, compiling, running and exporting read."""

    family: Family
    config: Config  # canonical: every parameter present
    env: Mapping[str, Any]  # params and derived values
    plan: LaunchPlan

    @property
    def name(self) -> str:
        return self.config.name


@dataclass
class Family:
    """A kernel template and what it declares."""

    name: str
    path: Path
    declaration: _decl.Declaration
    constraints: list[Constraint] = field(default_factory=list)

    @property
    def description(self) -> str:
        return self.declaration.description

    @property
    def params(self) -> dict[str, _decl.Param]:
        return self.declaration.params

    @property
    def derived(self) -> dict[str, Any]:
        return self.declaration.derived

    @property
    def launch(self) -> _decl.Launch:
        return self.declaration.launch

    def device_gaps(self, limits: DeviceLimits) -> list[str]:
        """Why this family cannot run on the device at all ([] when it can): it is built for an
        architecture-specific target of another architecture."""
        arch = self.declaration.arch
        reason = _arch_constraint(arch).check({}, limits) if arch else None
        return [f"{self.name} {reason}"] if reason else []

    def compile_arch(self, device_arch: str) -> str:
        """The target its kernels compile for on a device of `device_arch`: the family's own
        architecture-specific one (sm_90a) where it declares one, else the device's."""
        return self.declaration.arch or device_arch

    @property
    def defaults(self) -> dict[str, Any]:
        """Params a stored config may omit (added to the family later)."""
        return {p.name: p.default for p in self.params.values() if p.default is not None}

    @classmethod
    def load(cls, name: str, template_dir: Path | None = None) -> Family:
        if not _NAME.match(name):
            raise UserError(f"family {name!r}: names are lower-case letters, digits and '_'")
        dirs = [Path(template_dir)] if template_dir else template_dirs()
        path = next((d / f"{name}.cu.j2" for d in dirs if (d / f"{name}.cu.j2").is_file()), None)
        if path is None:
            raise UserError(f"unknown family {name!r}; known: {', '.join(known_families(template_dir))}")
        text = yamlio.read_text(path)
        m = _FRONT.match(text)
        if not m:
            raise UserError(f"{path}: no '{{#- autotune' declaration block at the top")
        declaration = _decl.parse(m.group(1), str(path), first_line=text[: m.start(1)].count("\n") + 1)
        try:  # the template's own syntax, checked now rather than at its first render
            jinja2.Environment().parse(text)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from None
        constraints = [_template_constraint(ex, why) for ex, why in declaration.constraints]
        if declaration.arch:
            constraints.append(_arch_constraint(declaration.arch))
        return cls(name, path, declaration, constraints + _device_constraints())

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
            for inc in re.findall(r"{%-?\s*(?:include|import|from)\s+[\"']([^\"']+)[\"']", text):
                # Where render.environment's loader finds it: beside the template, then built in.
                found = next((d / inc for d in (self.path.parent, TEMPLATE_DIR) if (d / inc).is_file()), None)
                if found is not None:
                    todo.append((inc, found.read_text()))
        return h.hexdigest()[:10]

    def derive(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Params (declared defaults for those left out) plus every derived value (in declaration order)."""
        env = {**self.defaults, **params}
        for dname, ex in self.derived.items():
            env[dname] = _int(ex, env, self.path)
        env["DYNAMIC_SMEM"] = _int(self.launch.dynamic_smem, env, self.path)
        return env

    def gaps(self, problem: Problem) -> list[str]:
        """Why this family cannot run `problem` ([] when it can): its TRANS_A / TRANS_B leave the
        layout out, it has no BATCHED to read a batch with, or its PRECISION leaves out the
        problem's tier (a family without PRECISION computes in FP32, which meets every tier)."""
        gaps = []
        what = {"TRANS_A": "read A as K x M", "TRANS_B": "read B as N x K", "BATCHED": "run a batch in one launch"}
        for pname, want in problem.pinned.items():
            param = self.params.get(pname)
            if pname == "PRECISION":
                if param is not None and want not in param.choices:
                    tiers = ", ".join(param.choices)
                    gaps.append(f"{self.name} computes at precision {tiers}, not {want} (problem {problem.name})")
            elif want not in ((param.lo, param.hi) if param is not None and not param.choices else (0,)):
                gaps.append(f"{self.name} does not {what[pname]} (problem {problem.name})")
        return gaps

    def pinned_values(self, problem: Problem) -> dict[str, int]:
        """The parameters the problem fixes (layout, BATCHED) that this family declares."""
        return {p: v for p, v in problem.pinned.items() if p in self.params}

    def built_for(self, config: Config, problem: Problem) -> Config:
        """`config` built for the problem's layout and batching: those parameters set to it. Where
        that breaks a rule of the template the config kept, the other parameters that rule reads
        go back to their defaults when that mends it (a split-K config's batched form is its
        data-parallel one); otherwise the result breaks it (see `broken_rules`)."""
        pinned = self.pinned_values(problem)
        before = set(self.broken_rules(config))
        cfg = self.resolve({**config.as_dict(), **pinned}).config
        env = self.derive(cfg.as_dict())
        broken = [ex for ex, why in self.declaration.constraints if not ex(env) and why not in before]
        names = set().union(*(ex.names for ex in broken)) & set(self.defaults) - set(pinned)
        if names:
            mended = self.resolve({**cfg.as_dict(), **{n: self.defaults[n] for n in names}}).config
            if set(self.broken_rules(mended)) <= before:
                return mended
        return cfg

    def broken_rules(self, config: Config) -> list[str]:
        """The template's own constraints `config` breaks (its `why`s; device limits aside)."""
        env = self.derive(config.as_dict())
        return [why for ex, why in self.declaration.constraints if not ex(env)]

    def unsuited(self, problem: Problem) -> list[str]:
        """Why this family is not meant for `problem` (its declared `suits` it breaks); [] when it is."""
        env = {"M": problem.M, "N": problem.N, "K": problem.K}
        return [why for ex, why in self.declaration.suits if not ex(env)]

    def violations(self, config: Config | Resolved, limits: DeviceLimits) -> list[str]:
        """Every static (pre-compile) rule this config breaks, each with its reason."""
        env = config.env if isinstance(config, Resolved) else self.derive(config.as_dict())
        return [r for c in self.constraints if (r := c.check(env, limits))]

    def validate_params(self, params: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Values from the declared domains, every parameter present, nothing else (a parameter
        that replaced an older one takes the older one's value)."""
        params = dict(params)
        for p in self.params.values():
            if p.was is not None and p.was[0] in params and p.name not in params:
                old, names = p.was[0], p.was[1]
                value = params.pop(old)
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(names):
                    raise UserError(
                        f"{where}: {old}={yamlio.shown(value)} (now {p.name}) is not one of 0..{len(names) - 1}"
                    )
                params[p.name] = names[value]
        unknown = set(params) - set(self.params)
        if unknown:
            raise UserError(
                f"{where}: unknown parameter {yamlio.shown(sorted(map(str, unknown))[0])} for family {self.name} "
                f"(has {', '.join(self.params)})"
            )
        params = {**self.defaults, **params}
        missing = [p for p in self.params if p not in params]
        if missing:
            raise UserError(f"{where}: missing parameter {missing[0]!r} for family {self.name}")
        return {p: self.params[p].check(params[p], where) for p in self.params}

    def check_value(self, pname: str, value: Any, where: str) -> Any:
        return self.params[pname].check(value, where)

    def resolve(self, config: Config | Mapping[str, Any], where: str | None = None) -> Resolved:
        """The config validated (defaults filled in, older parameters renamed), its derived
        values and its launch plan."""
        if isinstance(config, Config):
            if config.family != self.name:
                raise ValueError(f"config of {config.family} resolved with family {self.name}")
            where, raw = where or config.name, config.as_dict()
        else:
            where, raw = where or f"a {self.name} config", dict(config)
        params = self.validate_params(raw, where)
        env = self.derive(params)
        return Resolved(self, Config.make(self.name, params), env, plan_for(self.launch, env))


def _int(expr, env: Mapping[str, Any], path: Path) -> int:
    try:
        return int(expr(env))
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise UserError(f"{path}: {expr.text!r} cannot be evaluated ({exc})") from None


def known_families(template_dir: Path | None = None) -> list[str]:
    dirs = [Path(template_dir)] if template_dir else template_dirs()
    return sorted({p.name[: -len(".cu.j2")] for d in dirs for p in d.glob("*.cu.j2") if not p.name.startswith("_")})


def read_yaml(path: Path) -> Any:
    """A YAML file through safe_load; a missing file, bad text or bad YAML is one UserError naming it."""
    return yamlio.read(path)


@dataclass
class Enumeration:
    valid: list[Config]
    total: int
    rejected: collections.Counter = field(default_factory=collections.Counter)  # label -> points removed

    def top_reasons(self, n: int = 3) -> list[tuple[str, int]]:
        return self.rejected.most_common(n)


_SPACE_KEYS = ("family", "description", "space", "seeds", "fallback")


@dataclass
class Space:
    """What to try for one family: value lists per parameter, seeds (tried first), and a fallback."""

    family: Family
    values: dict[str, list[Any]]
    seeds: list[Config]
    source: str = ""
    fallback: Config | None = None
    cold: bool = False  # the seeds were left out on purpose (search --no-seeds): a study of its own
    # The layout parameters a seed's entry names, by seed (most name none): a seed written for a
    # layout (B transposed into the workspace first, a rule of B stored N x K) is for it only.
    seed_layouts: dict[Config, dict[str, Any]] = field(default_factory=dict)
    # Configs measured on other GPUs (search --priors): tried after the seeds like them, but only
    # where they are valid points here (another GPU's record may lie outside these value lists).
    priors: list[Config] = field(default_factory=list)

    def with_priors(self, priors: Iterable[Config]) -> Space:
        """This space with priors, as the family resolves them (defaults of parameters a stored
        config predates filled in); one the template cannot read is not a point here: left out."""
        out = []
        for cfg in priors:
            try:
                out.append(self.family.resolve(cfg).config)
            except UserError:
                continue
        return dataclasses.replace(self, priors=list(dict.fromkeys(out)))

    def seed_layout(self, seed: Config) -> dict[str, Any]:
        return self.seed_layouts.get(seed, {})

    def seeds_for(self, problem: Problem) -> Space:
        """This space with only the seeds meant for the problem's layout: a seed that names TRANS_A
        or TRANS_B is for problems stored that way; the others are built for any layout."""
        pinned = problem.pinned
        keep = [s for s in self.seeds if all(pinned[p] == v for p, v in self.seed_layout(s).items())]
        return self if len(keep) == len(self.seeds) else dataclasses.replace(self, seeds=keep)

    def without_seeds(self) -> Space:
        """This space searched cold: no seeds, as on a GPU nobody has measured configs on."""
        return dataclasses.replace(self, seeds=[], cold=True)

    @classmethod
    def load(cls, family: str | Family, path: Path | None = None) -> Space:
        fam = family if isinstance(family, Family) else Family.load(family)
        if path is None:  # configs/<name>.yaml, or <name>.yaml beside a template from elsewhere
            path = CONFIG_DIR / f"{fam.name}.yaml"
            if not path.is_file() and (fam.path.parent / f"{fam.name}.yaml").is_file():
                path = fam.path.parent / f"{fam.name}.yaml"
        path = Path(path)
        return cls.from_dict(fam, read_yaml(path), str(path))

    @classmethod
    def from_dict(cls, fam: Family, data: Any, where: str) -> Space:
        if not isinstance(data, dict):
            raise UserError(f"{where}: expected a mapping with 'space' (and optional 'seeds', 'fallback', 'family')")
        for key in data:
            if key not in _SPACE_KEYS:
                raise UserError(
                    f"{yamlio.where(where, data, key)}: unknown key {yamlio.shown(str(key))} "
                    f"(allowed: {', '.join(_SPACE_KEYS)})"
                )
        if data.get("family", fam.name) != fam.name:
            raise UserError(f"{where}: file is for family {yamlio.shown(data['family'])}, not {fam.name!r}")
        raw = data.get("space")
        if not isinstance(raw, dict) or not raw:
            raise UserError(f"{where}: 'space' must map each parameter to a list of values")
        values: dict[str, list[Any]] = {}
        for pname, vals in raw.items():
            at = yamlio.where(where, raw, pname)
            if pname not in fam.params:
                raise UserError(
                    f"{at}: unknown parameter {yamlio.shown(pname)} for family {fam.name} (has {', '.join(fam.params)})"
                )
            if not isinstance(vals, list):
                vals = [vals]
            if not vals:
                raise UserError(f"{at}: {pname} has no values")
            param = fam.params[pname]
            values[pname] = param.ordered(param.check(v, at) for v in vals)
        for pname, default in fam.defaults.items():
            values.setdefault(pname, [default])  # a space written before the parameter existed
        missing = [p for p in fam.params if p not in values]
        if missing:
            raise UserError(f"{where}: space is missing parameter {missing[0]!r}")
        values = {p: values[p] for p in fam.params}  # declaration order drives pruning
        seeds, seed_layouts = [], {}
        raw_seeds = data.get("seeds") or []
        if not isinstance(raw_seeds, list):
            raise UserError(f"{yamlio.where(where, data, 'seeds')}: 'seeds' must be a list of configs")
        for i, seed in enumerate(raw_seeds):
            at = f"{yamlio.where(where, seed)} seed #{i + 1}" if isinstance(seed, dict) else f"{where} seed #{i + 1}"
            seeds.append(_config(fam, seed, at))
            if any(p in seed for p in LAYOUT_PARAMS):
                seed_layouts[seeds[-1]] = {p: seeds[-1][p] for p in LAYOUT_PARAMS if p in seed}
        fallback = None
        if data.get("fallback") is not None:
            fallback = _config(fam, data["fallback"], f"{yamlio.where(where, data, 'fallback')} fallback")
        return cls(fam, values, seeds, where, fallback, seed_layouts=seed_layouts)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values.values())

    def for_problem(self, problem: Problem) -> Space:
        """This space with the parameters the problem fixes (layout, BATCHED) set to its values
        (the seeds and the fallback too): a kernel is built and tuned for one layout, batched or
        not. A UserError when the family cannot run the problem."""
        gaps = self.family.gaps(problem)
        if gaps:
            raise UserError(gaps[0])
        fixed = self.family.pinned_values(problem)
        if all(self.values[p] == [v] for p, v in fixed.items()):
            return self

        def pin(c: Config | None) -> Config | None:
            return None if c is None else self.family.built_for(c, problem)

        values = {p: ([fixed[p]] if p in fixed else v) for p, v in self.values.items()}
        seeds = [pin(c) for c in self.seeds]
        args = (self.source, pin(self.fallback), self.cold, self.seed_layouts, self.priors)
        return Space(self.family, values, seeds, *args)

    def enumerate(self, limits: DeviceLimits) -> Enumeration:
        """All statically valid points, in the order of a depth-first walk over the parameters
        (declaration order, each value list in order), with how many points each rule removed.

        Level by level over the parameters: the surviving prefixes times the next parameter's
        values, as columns of value codes. Each derived value and rule is computed when every
        parameter it reads is fixed, once per distinct combination of what it reads among the
        rows (a rule reads a few names, so a handful of calls cover hundreds of thousands of
        rows), and a rule sees only the rows that passed the rules before it; so a subtree is
        cut at once and counted against the first rule that cut it, as a walk would. A walk in
        Python, one point at a time, took 7-10 s for warptile's 600,000 valid points: most of a
        search's start-up, and paid again by every worker.
        """
        fam, order = self.family, list(self.values)
        depth_of = {p: i for i, p in enumerate(order)}
        deps: dict[str, set[str]] = {p: {p} for p in order}
        derived = list(fam.derived.items()) + [("DYNAMIC_SMEM", fam.launch.dynamic_smem)]
        for dname, ex in derived:
            deps[dname] = set().union(*(deps[n] for n in ex.names)) if ex.names else set()

        def level(names: Iterable[str]) -> int:
            return max((depth_of[p] for n in names for p in deps[n]), default=0)

        derived_at = collections.defaultdict(list)
        for dname, ex in derived:
            derived_at[level(ex.names)].append((dname, ex))
        rules_at = collections.defaultdict(list)
        for c in fam.constraints:
            rules_at[level(c.names)].append(c)
        below = [math.prod(len(self.values[p]) for p in order[i + 1 :]) for i in range(len(order))]
        rejected: collections.Counter = collections.Counter()
        done: list[_Columns] = []

        def descend(cols: _Columns, first: int) -> None:
            for d in range(first, len(order)):
                pname = order[d]
                if cols.rows > 1 and cols.rows * len(self.values[pname]) > CHUNK_ROWS:
                    # Bounded memory: the rows so far in slices, each taken down the rest of
                    # the levels in turn (the order stays the walk's).
                    step = max(1, CHUNK_ROWS // len(self.values[pname]))
                    for start in range(0, cols.rows, step):
                        descend(cols.slice(start, start + step), d)
                    return
                cols.extend(pname, self.values[pname])
                for dname, ex in derived_at[d]:
                    cols.derive(dname, ex.names, lambda env, ex=ex: int(ex(env)))
                alive = None
                for rule in rules_at[d]:
                    ok = cols.test(rule.names, lambda env, rule=rule: rule.holds(env, limits), alive)
                    failed = int(np.count_nonzero(~ok if alive is None else alive & ~ok))
                    if failed:
                        rejected[rule.label] += failed * below[d]
                    alive = ok if alive is None else alive & ok
                if alive is not None:
                    cols.keep(alive)
            done.append(cols)

        descend(_Columns(), 0)
        with _no_gc():
            valid = [c for cols in done for c in cols.configs(fam.name, sorted(order))]
        return Enumeration(valid, self.size, rejected)

    def describe_empty(self, en: Enumeration) -> str:
        reasons = "; ".join(f"{label!r} removed {n}" for label, n in en.top_reasons())
        return f"family {self.family.name}: no valid point among {en.total} ({self.source}); {reasons}"


CHUNK_ROWS = 4_000_000  # rows of an enumeration's level at most (warptile's largest: 2.4 million)


@contextlib.contextmanager
def _no_gc():
    """Hundreds of thousands of objects made at once, none of them garbage: without the cyclic
    collector's passes over them (which it makes every 700 allocations) the configs of a big
    space are made 4x faster."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Columns:
    """Rows of a space's enumeration as columns: per name, an array of codes into that name's
    list of values (a parameter's value list; a derived name's distinct values)."""

    def __init__(self):
        self.codes: dict[str, np.ndarray] = {}
        self.values: dict[str, list] = {}
        self.rows = 1

    def extend(self, name: str, values: list) -> None:
        """Every row times every value of `name`, in order (rows stay in walk order)."""
        k = len(values)
        for n in self.codes:
            self.codes[n] = np.repeat(self.codes[n], k)
        self.codes[name] = np.tile(np.arange(k, dtype=np.int32), self.rows)
        self.values[name] = list(values)
        self.rows *= k

    def slice(self, start: int, stop: int) -> _Columns:
        out = _Columns()
        out.codes = {n: c[start:stop] for n, c in self.codes.items()}
        out.values = dict(self.values)
        out.rows = len(range(start, min(stop, self.rows)))
        return out

    def keep(self, mask: np.ndarray) -> None:
        for n in self.codes:
            self.codes[n] = self.codes[n][mask]
        self.rows = int(np.count_nonzero(mask))

    def _combinations(self, names: Iterable[str], mask: np.ndarray | None) -> tuple[np.ndarray, list[dict]]:
        """The distinct combinations of `names`' values among the rows (those in `mask`): per
        row, the index of its combination (arbitrary outside `mask`); and each one's values."""
        names = sorted(names)
        key, radix = np.zeros(self.rows, dtype=np.int64), 1
        for n in names:  # mixed radix over the codes, re-numbered densely before it could overflow
            k = len(self.values[n])
            if radix * k >= 1 << 62:
                _, key = np.unique(key, return_inverse=True)
                radix = int(key.max()) + 1 if len(key) else 1
            key, radix = key * k + self.codes[n], radix * k
        rows = np.arange(self.rows) if mask is None else np.flatnonzero(mask)
        sel = key[rows]
        if radix <= 1 << 22:  # a table by key: no sort of the rows
            rep = np.full(radix, -1, dtype=np.int64)
            rep[sel] = rows  # any row of a combination stands for it
            present = np.flatnonzero(rep >= 0)
            slot = np.zeros(radix, dtype=np.int64)
            slot[present] = np.arange(len(present))
            index, reps = slot[key], rep[present]
        else:
            _, first, inverse = np.unique(sel, return_index=True, return_inverse=True)
            index = np.zeros(self.rows, dtype=np.int64)
            index[rows] = inverse
            reps = rows[first]
        envs = [{n: self.values[n][int(self.codes[n][r])] for n in names} for r in reps.tolist()]
        return index, envs

    def derive(self, name: str, names: Iterable[str], fn: Callable[[dict], int]) -> None:
        index, envs = self._combinations(names, None)
        results = [fn(env) for env in envs]
        distinct = sorted(set(results))
        code_of = {v: i for i, v in enumerate(distinct)}
        codes = np.array([code_of[v] for v in results], dtype=np.int32)
        self.codes[name] = codes[index] if len(codes) else np.zeros(self.rows, dtype=np.int32)
        self.values[name] = distinct

    def test(self, names: Iterable[str], fn: Callable[[dict], bool], mask: np.ndarray | None) -> np.ndarray:
        """fn per row, as a boolean array (False outside `mask`, where fn is not called)."""
        index, envs = self._combinations(names, mask)
        if not envs:
            return np.zeros(self.rows, dtype=bool)
        ok = np.array([bool(fn(env)) for env in envs], dtype=bool)[index]
        return ok if mask is None else ok & mask

    def configs(self, family: str, names: list[str]) -> list[Config]:
        """The rows as Configs (parameters in Config.make's sorted order), each with its name
        made here from the pieces of its values: one pass for the whole space."""
        pairs, pieces = [], []
        for n in names:
            vals = self.values[n]
            pair = np.empty(len(vals), dtype=object)
            pair[:] = [(n, v) for v in vals]
            piece = np.array([name_piece(n, v) for v in vals], dtype=object)
            pairs.append(pair[self.codes[n]].tolist())
            pieces.append(piece[self.codes[n]].tolist())
        out = [Config(family, params) for params in zip(*pairs, strict=True)]
        for cfg, name in zip(out, map("".join, zip([family] * len(out), *pieces, strict=True)), strict=True):
            cfg.__dict__["name"] = name  # Config.name's cache: the same pieces, joined the same way
        return out


def _config(fam: Family, raw: Any, where: str) -> Config:
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a mapping of parameters")
    return fam.resolve(raw, where).config
