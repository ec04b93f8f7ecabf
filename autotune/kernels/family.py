"""Kernel families: a template and its declaration, found, checked and read; a config resolved once.

A family is `templates/<name>.cu.j2`, whose first lines are a Jinja comment holding its
declaration (the schema: kernels/decl.py; the launch keys: kernels/launch.py), so a template and
its rules travel together. Its YAML (`configs/<name>.yaml`, or `<name>.yaml` beside a template
from elsewhere) holds its space (kernels/space.py) and its `model:` (kernels/tiles.py), the latter
checked when the family is loaded. `Family.resolve` validates a config once: rendering,
compiling, running and exporting all read the `Resolved` it returns.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from ..core import yamlio
from ..core.types import Config, Problem, UserError, quoted
from . import decl as _decl
from . import tiles as _tiles
from .constraints import Constraint, arch_constraint, device_constraints, template_constraint
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


# The declaration: from the line `{#- autotune` to the first line that starts (after spaces and
# tabs) with `#}`. Neither edge's run of blanks spans lines: where it did (`\s*`), a few
# thousand blank lines and no end took the regular expression minutes (cubic).
_FRONT = re.compile(r"\A\{#-?\s*autotune[ \t\r]*\n(.*?)^[ \t]*-?#\}", re.S | re.M)
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")  # as a record's family names (records/validate.py)


@dataclass(frozen=True)
class Resolved:
    """One config of one family, resolved once: what rendering, compiling, running, exporting read.

    It holds every parameter (defaults filled in), the derived values and the launch plan.
    """

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
    model: _tiles.Model | None = None  # its YAML's `model:` (None: the family has no YAML)

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
        """Return why this family cannot run on the device at all ([] when it can)."""
        # The one reason: it is built for an architecture-specific target of another architecture.
        arch = self.declaration.arch
        reason = arch_constraint(arch).check({}, limits) if arch else None
        return [f"{self.name} {reason}"] if reason else []

    def compile_arch(self, device_arch: str) -> str:
        """Return the target its kernels compile for on a device of `device_arch`.

        That is the family's own architecture-specific one (sm_90a) where it declares one, else the
        device's.
        """
        return self.declaration.arch or device_arch

    @property
    def defaults(self) -> dict[str, Any]:
        """Return the params a stored config may omit (added to the family later)."""
        return {p.name: p.default for p in self.params.values() if p.default is not None}

    @classmethod
    def load(cls, name: str, template_dir: Path | None = None) -> Family:
        if not _NAME.fullmatch(name):
            raise UserError(f"family {quoted(name)}: names are lower-case letters, digits and '_', at most 64")
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
            ImmutableSandboxedEnvironment().parse(text, filename=str(path))
        except Exception as exc:  # noqa: BLE001 - the template's text, not autotune, is at fault
            raise template_error(exc, path) from None
        constraints = [template_constraint(ex, why) for ex, why in declaration.constraints]
        if declaration.arch:
            constraints.append(arch_constraint(declaration.arch))
        yaml_path = config_path(name, path)
        model = None if yaml_path is None else _model(yaml_path, declaration)
        return cls(name, path, declaration, constraints + device_constraints(), model)

    @property
    def config_path(self) -> Path | None:
        """Return its YAML: configs/<name>.yaml, or <name>.yaml beside its template, or None."""
        return config_path(self.name, self.path)

    @cached_property
    def source(self) -> str:
        return self.path.read_text()

    @cached_property
    def fingerprint(self) -> str:
        """Return a hash of the template and the templates it includes."""
        # A measurement taken with other template text is of other code.
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
        """Return the params (defaults for those left out) and every derived value, in order."""
        env = {**self.defaults, **params}
        for dname, ex in self.derived.items():
            env[dname] = _int(ex, env, self.path)
        env["DYNAMIC_SMEM"] = _int(self.launch.dynamic_smem, env, self.path)
        return env

    def gaps(self, problem: Problem) -> list[str]:
        """Return why this family cannot run `problem` ([] when it can).

        Its TRANS_A / TRANS_B leave the layout out, it has no BATCHED to read a batch with, or its
        PRECISION leaves out the problem's tier.
        """
        # A family without PRECISION computes in FP32, which meets every tier.
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
        """Return the parameters the problem fixes (layout, BATCHED) that this family declares."""
        return {p: v for p, v in problem.pinned.items() if p in self.params}

    def built_for(self, config: Config, problem: Problem) -> Config:
        """Return `config` built for the problem's layout and batching: those parameters set to it.

        Where that breaks a rule of the template the config kept, the other parameters that rule
        reads go back to their defaults when that mends it (a split-K config's batched form is its
        data-parallel one); otherwise the result breaks it (see `broken_rules`).
        """
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
        """Return the `why`s of the template's own rules `config` breaks (device limits aside)."""
        env = self.derive(config.as_dict())
        return [why for ex, why in self.declaration.constraints if not ex(env)]

    def unsuited(self, problem: Problem) -> list[str]:
        """Return why this family is not meant for `problem` (the `suits` it breaks), or []."""
        env = {"M": problem.M, "N": problem.N, "K": problem.K}
        return [why for ex, why in self.declaration.suits if not ex(env)]

    def violations(self, config: Config | Resolved, limits: DeviceLimits) -> list[str]:
        """Return every static (pre-compile) rule this config breaks, each with its reason."""
        env = config.env if isinstance(config, Resolved) else self.derive(config.as_dict())
        return [r for c in self.constraints if (r := c.check(env, limits))]

    def validate_params(self, params: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Return the config's values from the declared domains: every parameter, nothing else.

        A parameter that replaced an older one takes the older one's value.

        Raises:
            UserError: A value outside its domain, or a parameter unknown or missing.
        """
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

    def resolve(self, config: Config | Mapping[str, Any], where: str | None = None) -> Resolved:
        """Validate the config once and return it with its derived values and its launch plan.

        Defaults are filled in and older parameters renamed; a UserError names `where` otherwise.
        """
        if isinstance(config, Config):
            if config.family != self.name:
                raise ValueError(f"config of {config.family} resolved with family {self.name}")
            where, raw = where or config.name, config.as_dict()
        else:
            where, raw = where or f"a {self.name} config", dict(config)
        params = self.validate_params(raw, where)
        env = self.derive(params)
        plan = plan_for(self.launch, env)
        if self.model is not None:
            plan = dataclasses.replace(plan, tile=self.model.tile_of(env))
        return Resolved(self, Config.make(self.name, params), env, plan)


def config_path(name: str, template: Path) -> Path | None:
    """Return a family's YAML: configs/<name>.yaml, else <name>.yaml beside `template`, or None."""
    for path in (CONFIG_DIR / f"{name}.yaml", template.parent / f"{name}.yaml"):
        if path.is_file():
            return path
    return None


# YAML read by its file's (path, mtime, size): a family's is read when it is loaded and again for
# its space, and parsing the largest takes tens of milliseconds. Callers must not change what it returns.
_READ: dict[tuple[str, int, int], Any] = {}


def read_config(path: Path) -> Any:
    """Read a family's YAML (or a space's) as core/yamlio does; shared: read, never changed."""
    try:
        st = path.stat()
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):  # a pipe's stat says nothing of what it holds
        return yamlio.read(path)  # which says what is wrong with it
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _READ:
        if len(_READ) >= 64:
            _READ.clear()
        _READ[key] = yamlio.read(path)
    return _READ[key]


def _model(path: Path, declaration: _decl.Declaration) -> _tiles.Model:
    """Parse the `model:` section of a family's YAML `path`; one without it is an error."""
    # An error, not a tile of one: the dispatch model reads the tile of every family.
    data = read_config(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with 'space' and 'model' (and optional 'seeds', 'fallback')")
    if "model" not in data:
        raise UserError(
            f"{path}: no 'model' section: declare what the models read, at least the tile "
            "(model: {tile: [rows, columns]}; templates/README.md, 'Adding a kernel family')"
        )
    return _tiles.parse(data, str(path), declaration)


def _int(expr, env: Mapping[str, Any], path: Path) -> int:
    try:
        return int(expr(env))
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise UserError(f"{path}: {expr.text!r} cannot be evaluated ({exc})") from None


def template_error(exc: Exception, where: Path | str) -> UserError:
    """Return what a template's parse or render raised, as one line naming the template."""
    # The template's line too, where known: a template from anywhere may raise anything.
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return UserError(f"{exc.filename or exc.name or where}:{exc.lineno}: template syntax error: {exc.message}")
    at = _template_line(exc) or str(where)
    if isinstance(exc, SecurityError):
        return UserError(
            f"{at}: outside the template sandbox: {str(exc).rstrip('.')} (a template reads its values "
            "and calls its macros, nothing of Python's)"
        )
    if isinstance(exc, jinja2.UndefinedError):  # a name the template reads that nothing declares
        return UserError(f"{at}: {exc.message} (not a parameter, derived value or launch value)")
    if isinstance(exc, RecursionError):
        return UserError(f"{at}: template nested or recursing too deeply")
    first = (str(exc).splitlines() or [""])[0]
    return UserError(f"{at}: the template raised {type(exc).__name__}" + (f": {first[:200]}" if first else ""))


def _template_line(exc: BaseException) -> str | None:
    """Return 'path:line' of the innermost template frame of `exc` (Jinja maps frames to lines)."""
    where, tb = None, exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.endswith(".j2"):
            where = f"{name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def known_families(template_dir: Path | None = None) -> list[str]:
    dirs = [Path(template_dir)] if template_dir else template_dirs()
    return sorted({p.name[: -len(".cu.j2")] for d in dirs for p in d.glob("*.cu.j2") if not p.name.startswith("_")})


@functools.cache
def cached_family(name: str) -> Family:
    """Return `Family.load(name)`, parsed once a process."""
    # Choosing a kernel for a new shape asks every stored record's families whether they read its
    # layout.
    return Family.load(name)
