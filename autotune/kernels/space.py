"""Search spaces: what to try for one family, as `configs/<name>.yaml` declares it.

A space holds the values per parameter, seeds (tried first) and a fallback (a config meant to be
correct and decent on every GPU profile, for untuned shapes). It is pinned to a problem's layout
and batching, and enumerated (kernels/enumeration.py) under a device's limits. The same file's
`model:` (what the models read, kernels/tiles.py) is the family's, read with it (kernels/family.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import yamlio
from ..core.types import LAYOUT_PARAMS, Config, Problem, UserError
from . import tiles as _tiles
from .constraints import Constraint
from .enumeration import Enumeration, enumerate_space
from .enumeration import check_size as _check_size
from .family import Family, read_config
from .limits import DeviceLimits


def read_yaml(path: Path) -> Any:
    """Read a YAML file through safe_load; a missing file or bad YAML is one UserError naming it."""
    return yamlio.read(path)


_SPACE_KEYS = ("family", "description", "model", "space", "seeds", "fallback")


@dataclass
class Space:
    """What to try for one family: value lists per parameter, seeds (tried first), a fallback."""

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
    # Rules of the problem the space was built for (for_problem), beside the family's own.
    rules: tuple[Constraint, ...] = ()

    def with_priors(self, priors: Iterable[Config]) -> Space:
        """Return this space with priors, as the family resolves them (missing defaults filled in).

        A prior the template cannot read is not a point here: it is left out.
        """
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
        """Return this space with only the seeds meant for the problem's layout.

        A seed that names TRANS_A or TRANS_B is for problems stored that way; the others are built
        for any layout.
        """
        pinned = problem.pinned
        keep = [s for s in self.seeds if all(pinned[p] == v for p, v in self.seed_layout(s).items())]
        return self if len(keep) == len(self.seeds) else dataclasses.replace(self, seeds=keep)

    def without_seeds(self) -> Space:
        """Return this space searched cold: no seeds, as on a GPU nobody has measured configs on."""
        return dataclasses.replace(self, seeds=[], cold=True)

    @classmethod
    def load(cls, family: str | Family, path: Path | None = None) -> Space:
        fam = family if isinstance(family, Family) else Family.load(family)
        if path is None:  # configs/<name>.yaml, or <name>.yaml beside a template from elsewhere
            path = fam.config_path
            if path is None:
                raise UserError(f"family {fam.name}: no configs/{fam.name}.yaml, nor {fam.name}.yaml beside {fam.path}")
        path = Path(path)
        data = read_config(path) if path == fam.config_path else read_yaml(path)  # the family's: read once
        return cls.from_dict(fam, data, str(path))

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
        if "model" in data:
            _same_model(fam, data, where)
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
        if fam.model is not None:  # its values are numbers at the configs the file names
            for cfg in ([fallback] if fallback else []) + seeds:
                fam.model.check(fam.derive(cfg.as_dict()))
        return cls(fam, values, seeds, where, fallback, seed_layouts=seed_layouts)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values.values())

    def check_size(self) -> None:
        """Raise a UserError naming the file when the space has more points than a search may walk.

        The bound is kernels/enumeration.MAX_POINTS; this says so before any work, as enumerating
        does too.
        """
        _check_size(self.family.name, self.values, self.source)

    def for_problem(self, problem: Problem) -> Space:
        """Return this space with the parameters the problem fixes (layout, BATCHED) pinned.

        They are set to the problem's values, in the seeds and the fallback too: a kernel is built
        and tuned for one layout, batched or not.

        Raises:
            UserError: The family cannot run the problem.
        """
        gaps = self.family.gaps(problem)
        if gaps:
            raise UserError(gaps[0])
        fixed = self.family.pinned_values(problem)
        # (a space file that lists such a parameter keeps its own values)
        held = self.family.defaults
        opened = {p: v for p, v in _opened_at(problem).items() if p in held and self.values.get(p) == [held[p]]}
        if all(self.values[p] == [v] for p, v in fixed.items()) and not opened:
            return self

        def pin(c: Config | None) -> Config | None:
            return None if c is None else self.family.built_for(c, problem)

        values = {p: ([fixed[p]] if p in fixed else v) for p, v in self.values.items()} | opened
        seeds = [pin(c) for c in self.seeds]
        args = (self.source, pin(self.fallback), self.cold, self.seed_layouts, self.priors)
        return Space(self.family, values, seeds, *args, rules=_rules_at(problem, values))

    def enumerate(self, limits: DeviceLimits) -> Enumeration:
        """Return all statically valid points, with how many points each rule removed.

        The points come in the order of a depth-first walk over the parameters (declaration order,
        each value list in order).
        """
        return enumerate_space(self.family, self.values, limits, self.source, self.rules)

    def describe_empty(self, en: Enumeration) -> str:
        reasons = "; ".join(f"{label!r} removed {n}" for label, n in en.top_reasons())
        return f"family {self.family.name}: no valid point among {en.total} ({self.source}); {reasons}"


def _opened_at(problem: Problem) -> dict[str, list[int]]:
    """Return the parameters a search tries at this shape only, with their values.

    PACKA (warptile: A copied to a 16-byte row pitch first) changes a kernel only where the rows
    it copies A along are not 16-byte aligned: M % 4 != 0 with A stored K x M, K % 4 != 0 with A
    stored M x K (A_ROWS; the template's rules keep PACKA 1 to those), one matrix. Elsewhere the
    search spends no trials on two builds that run the same, and the space file need not list it.
    """
    rows = problem.M if problem.trans[0] else problem.K
    return {"PACKA": [0, 1]} if problem.batch == 1 and rows % 4 else {}


def _rules_at(problem: Problem, values: dict[str, list[Any]]) -> tuple[Constraint, ...]:
    """Return the points a search skips at this shape: A_ROWS 1 unpacked where K % 4 != 0.

    There A_ROWS's rows are unaligned and every copy of both operands goes by 4 bytes, where A_ROWS
    0 copies A by 4 bytes too but keeps B's 16-byte copies: nothing to gain (no stored K % 4 record
    chose it), and at nt the points PACKA adds would pass the valid points a search holds.
    """
    if problem.trans[0] or problem.K % 4 == 0 or 1 not in values.get("PACKA", []) or "A_ROWS" not in values:
        return ()
    label = "A_ROWS 1 only with A packed where K % 4 != 0"

    def check(env: dict[str, Any], _limits: DeviceLimits) -> str | None:
        return None if env["A_ROWS"] == 0 or env["PACKA"] == 1 else label

    return (Constraint(label, frozenset({"A_ROWS", "PACKA"}), check),)


def _same_model(fam: Family, data: Any, where: str) -> None:
    """Check that a space file's `model:` is the family's own: the models read that one."""
    model = _tiles.parse(data, where, fam.declaration)
    if fam.model is None or model.texts() != fam.model.texts():
        own = fam.config_path or f"{fam.name}.yaml beside {fam.path}"
        raise UserError(
            f"{yamlio.where(where, data, 'model')}: model differs from family {fam.name}'s own ({own}): "
            "the models read that one"
        )


def _config(fam: Family, raw: Any, where: str) -> Config:
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a mapping of parameters")
    return fam.resolve(raw, where).config
