"""A space's statically valid points, all of them, with how many points each rule removed.

The walk over the parameters is done level by level on columns of value codes, each rule
evaluated once per distinct combination of the values it reads.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import Config, UserError, name_piece
from .constraints import Constraint
from .limits import DeviceLimits

if TYPE_CHECKING:
    from .family import Family


@dataclass
class Enumeration:
    """A space's valid points, its size, and how many points each rule removed."""

    valid: list[Config]
    total: int
    rejected: collections.Counter = field(default_factory=collections.Counter)  # label -> points removed

    def top_reasons(self, n: int = 3) -> list[tuple[str, int]]:
        return self.rejected.most_common(n)


# Level by level over the parameters: the surviving prefixes times the next parameter's values,
# as columns of value codes. Each derived value and rule is computed when every parameter it reads
# is fixed, once per distinct combination of what it reads among the rows (a rule reads a few
# names, so a handful of calls cover hundreds of thousands of rows), and a rule sees only the rows
# that passed the rules before it; so a subtree is cut at once and counted against the first rule
# that cut it, as a walk would. A walk in Python, one point at a time, took 7-10 s for warptile's
# 600,000 valid points: most of a search's start-up, and paid again by every worker.
def enumerate_space(
    family: Family,
    values: dict[str, list[Any]],
    limits: DeviceLimits,
    where: str = "",
    rules: Iterable[Constraint] = (),
) -> Enumeration:
    """Return all statically valid points in depth-first walk order, with what each rule removed.

    The walk takes the parameters in declaration order, each value list in order; `rules` (a
    problem's, Space.for_problem) apply beside the family's.

    Raises:
        UserError: The space has more than MAX_POINTS points, or its rules would be evaluated more
            than MAX_EVALS times, or it has more than MAX_VALID valid points (naming `where`, the
            space's file), before its points are made.
    """
    total = check_size(family.name, values, where)
    order = list(values)
    derived_at, rules_at = _levels(family, order, rules)
    below = [math.prod(len(values[p]) for p in order[i + 1 :]) for i in range(len(order))]
    rejected: collections.Counter = collections.Counter()
    done: list[_Columns] = []
    spent = _Spent(family.name, total, where)

    def descend(cols: _Columns, first: int) -> None:
        for d in range(first, len(order)):
            pname = order[d]
            if cols.rows > 1 and cols.rows * len(values[pname]) > CHUNK_ROWS:
                # Bounded memory: the rows so far in slices, each taken down the rest of
                # the levels in turn (the order stays the walk's).
                step = max(1, CHUNK_ROWS // len(values[pname]))
                for start in range(0, cols.rows, step):
                    descend(cols.slice(start, start + step), d)
                return
            cols.extend(pname, values[pname])
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
        spent.held(cols.rows)

    descend(_Columns(spent), 0)
    with _no_gc():
        valid = [c for cols in done for c in cols.configs(family.name, sorted(order))]
    return Enumeration(valid, total, rejected)


# What one enumeration may take. The largest space that ships is warptile's: 31,104,000 points
# (the product of its value lists' lengths), 1,372,608 of them valid on an H100 (`autotune list
# --count`), enumerated in about 7 s and 1.6 GB. MAX_POINTS is 8 times warptile's space: its
# rows cost little (arrays; 214 million in 12 s on a shared core where no rule cut them early).
# MAX_EVALS bounds the Python work: a rule or derived value is evaluated once per distinct
# combination of the values it reads, 1,913 times for warptile's space, 50,822 for fewcols',
# the most of those that ship, but 6.4 million times (17 s) for coarse1d with every value of
# its domains, where each rule reads four parameters of 16-256 values. MAX_VALID bounds what is
# held: each valid point becomes a Config of 0.5-1 KB, so a few GB at the bound, 3 times
# warptile's valid points. Past any of them a space is refused in one line; unbounded, one of
# 10^16 points grew until memory ran out.
MAX_POINTS = 250_000_000
MAX_EVALS = 2_000_000
MAX_VALID = 4_000_000


class _Spent:
    """Count what one enumeration spends against MAX_EVALS and MAX_VALID; UserError past either."""

    def __init__(self, family: str, total: int, where: str):
        self.family, self.total, self.where = family, total, where
        self.evals = self.rows = 0

    def evaluations(self, n: int) -> None:
        """Count `n` more evaluations of a rule or derived value, refused before they are made."""
        self.evals += n
        if self.evals > MAX_EVALS:
            raise UserError(
                f"{_at(self.where)}the static filter would evaluate family {self.family}'s rules more than "
                f"{MAX_EVALS:,} times over the {self.total:,} points of its space; narrow its value lists"
            )

    def held(self, rows: int) -> None:
        """Count `rows` more valid points, still columns, refused before any Config is made."""
        self.rows += rows
        if self.rows > MAX_VALID:
            raise UserError(
                f"{_at(self.where)}more than {MAX_VALID:,} of the {self.total:,} points of family {self.family}'s "
                "space pass the static filter, more than a search holds; narrow its value lists"
            )


def check_size(family: str, values: dict[str, list[Any]], where: str = "") -> int:
    """Return the number of points of a space, before the static filter.

    That is the product of its value lists' lengths; a UserError naming `where` when it is more
    than MAX_POINTS.
    """
    total = math.prod(len(v) for v in values.values())
    if total > MAX_POINTS:
        raise UserError(
            f"{_at(where)}family {family}'s space has {total:,} points (the product of its value lists' "
            f"lengths), more than the {MAX_POINTS:,} one search may walk; narrow its value lists"
        )
    return total


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def _levels(family: Family, order: list[str], extra: Iterable[Constraint] = ()) -> tuple[dict, dict]:
    """Return the level (index in `order`) at which each derived value and each rule is computed.

    That is the level of the deepest parameter it reads, directly or through derived values.
    """
    depth_of = {p: i for i, p in enumerate(order)}
    deps: dict[str, set[str]] = {p: {p} for p in order}
    derived = list(family.derived.items()) + [("DYNAMIC_SMEM", family.launch.dynamic_smem)]
    for dname, ex in derived:
        deps[dname] = set().union(*(deps[n] for n in ex.names)) if ex.names else set()

    def level(names: Iterable[str]) -> int:
        return max((depth_of[p] for n in names for p in deps[n]), default=0)

    derived_at = collections.defaultdict(list)
    for dname, ex in derived:
        derived_at[level(ex.names)].append((dname, ex))
    rules_at = collections.defaultdict(list)
    for c in [*family.constraints, *extra]:
        rules_at[level(c.names)].append(c)
    return derived_at, rules_at


CHUNK_ROWS = 4_000_000  # rows of an enumeration's level at most (warptile's largest: 2.4 million)


@contextlib.contextmanager
def _no_gc():
    """Hold off the cyclic garbage collector while many objects, none of them garbage, are made.

    Without its passes (every 700 allocations) the configs of a big space are made 4x faster.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Columns:
    """Rows of a space's enumeration as columns of codes, one array per name.

    Each code indexes that name's list of values (a parameter's value list; a derived name's
    distinct values).
    """

    def __init__(self, spent: _Spent | None = None):
        self.codes: dict[str, np.ndarray] = {}
        self.values: dict[str, list] = {}
        self.rows = 1
        self.spent = spent  # charged for each combination evaluated

    def extend(self, name: str, values: list) -> None:
        """Multiply every row by every value of `name`, in order (rows stay in walk order)."""
        k = len(values)
        for n in self.codes:
            self.codes[n] = np.repeat(self.codes[n], k)
        self.codes[name] = np.tile(np.arange(k, dtype=np.int32), self.rows)
        self.values[name] = list(values)
        self.rows *= k

    def slice(self, start: int, stop: int) -> _Columns:
        out = _Columns(self.spent)
        out.codes = {n: c[start:stop] for n, c in self.codes.items()}
        out.values = dict(self.values)
        out.rows = len(range(start, min(stop, self.rows)))
        return out

    def keep(self, mask: np.ndarray) -> None:
        for n in self.codes:
            self.codes[n] = self.codes[n][mask]
        self.rows = int(np.count_nonzero(mask))

    def _combinations(self, names: Iterable[str], mask: np.ndarray | None) -> tuple[np.ndarray, list[dict]]:
        """Return the distinct combinations of `names`' values among the rows in `mask`.

        Per row, the index of its combination (arbitrary outside `mask`); and each one's values.
        """
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
        if self.spent is not None:
            self.spent.evaluations(len(reps))
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
        """Return fn per row, as a boolean array (False outside `mask`, where fn is not called)."""
        index, envs = self._combinations(names, mask)
        if not envs:
            return np.zeros(self.rows, dtype=bool)
        ok = np.array([bool(fn(env)) for env in envs], dtype=bool)[index]
        return ok if mask is None else ok & mask

    def configs(self, family: str, names: list[str]) -> list[Config]:
        """Return the rows as Configs (parameters in Config.make's sorted order).

        Each gets its name made here from the pieces of its values: one pass for the whole space.
        """
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
