"""Which stored config runs a shape, from one GPU's records in a results folder.

`table_for` reads the folder once per change of it; `_Table.choose` takes a tuned shape's best
entry, or the model's prediction for a shape never tuned; `built_for` builds each config for the
call's layout, batch and tier. A bad record raises one UserError naming the file, as
`autotune list` would (see `_read_table`).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from ..core.tiers import meets
from ..core.types import Config, Problem, UserError
from ..kernels.family import ROOT, cached_family
from ..kernels.limits import DeviceLimits
from ..records.results import entry_config, iter_records
from ..records.validate import fastest
from . import model
from .kernel import Kernel

_INSTALLED = ROOT == Path(__file__).resolve().parent.parent  # a wheel: templates inside the package
# The results that ship: the checkout's results/, or their copy inside an installed wheel.
_SHIPPED = str(ROOT / "results")


def results_dir() -> Path:
    """Return the results folder a search writes to and `load` reads by default.

    $AUTOTUNE_RESULTS, else ./results when it exists, else the checkout's results/; for an
    installed wheel ./results, whether or not it exists (the wheel's own results are read beside
    it by `matmul`, never written).
    """
    env = os.environ.get("AUTOTUNE_RESULTS")
    if env:
        return Path(env)
    return Path("results" if _INSTALLED or os.path.isdir("results") else _SHIPPED)


def _reads(family: str, problem: Problem) -> bool:
    """Whether `family` (known here) can be built for the problem's layout and batch."""
    try:
        return not cached_family(family).gaps(problem)
    except UserError:
        return False  # a family no longer shipped: its records cannot be used


def built_for(
    config: Config, layout: str = "nn", batch: int = 1, precision: str = "highest", limits: DeviceLimits | None = None
) -> Config | None:
    """Return `config` built for `layout`, `batch` and `precision`, or None where it cannot be.

    Its TRANS_A / TRANS_B / BATCHED (and PRECISION, where it has one) are set to theirs. None when
    that breaks one of its family's rules (a split-K config has no batched form) or, given a
    device's `limits`, one of the device's (a medium-tier wgmma config built for high holds twice
    the tiles in shared memory, past what a block may have: it would not launch).
    """
    return _built_for(config, layout, batch > 1, precision, limits)


@functools.lru_cache(maxsize=8192)
def _built_for(config: Config, layout: str, batched: bool, precision: str, limits: DeviceLimits | None):
    # Remembered: choosing a kernel for a new shape builds every stored config for its layout,
    # which costs more than the rest of the choice.
    fam = cached_family(config.family)
    cfg = fam.built_for(config, Problem(1, 1, 1, layout, 2 if batched else 1, precision=precision))
    if fam.broken_rules(cfg) or (limits is not None and fam.violations(cfg, limits)):
        return None
    return cfg


def nearest_entry(
    problem: Problem, slug: str, root: Path | None = None, family: str | None = None
) -> tuple[Problem, dict] | None:
    """Return (tuned shape, best entry) nearest to `problem` in log-space, or None if none is."""
    return table_for(root, slug).nearest(problem, family)


# A table is trusted while its folder's state (device, inode, mtime) is unchanged, but only once
# the folder's mtime is older than this when the table is read: a record renamed into the folder
# within the same timestamp tick (coarse on most filesystems, 2 s on FAT) as the change already
# seen would leave the mtime as it was. Until then the table is read again at each call.
_RACY_NS = 2_000_000_000
# How long a table is taken as its folder's without a stat: the stats of ./results and the
# shipped folder were most of table_for's time (10 us a call on a 2-core CI machine), and it runs
# on every call of matmul; a record a search writes in another process is seen 0.1 s later at most.
RECHECK_S = 0.1
_CHOICES_MAX = 4096  # shapes remembered per table; the oldest goes first


class _Table:
    """One GPU's records in a results folder, read at one state of it, and the kernels chosen."""

    def __init__(self, folder: str, state: tuple | None, records: list[tuple[Problem, dict]], clean: bool, routes=None):
        self.folder, self.state, self.records, self.clean = folder, state, records, clean
        # A shape's (beta 0) measured routes beside its families: name -> entry (records/fields.py).
        self.routes: dict[Problem, dict] = routes or {}
        self.choices: dict[tuple, Kernel] = {}
        self.settled: dict[tuple, object] = {}  # matmul's choices once its first call timed them (measure.py)
        self.plans: dict[str, object] = {}  # config name -> its launch plan (the model's)
        self.shortcuts: dict[tuple, object] = {}  # shortcut.key -> shortcut.Shortcut
        self.fresh_until = 0.0  # time.monotonic() until which the folder is not looked at again

    def _pool(self, problem: Problem) -> list[tuple[Problem, dict]]:
        """Return the records whose entries the model weighs for the problem's layout and batching.

        Those of its layout and batching first, then every other record (its configs built for this
        layout and batching, their predictions surcharged by model.foreign). A function of
        (layout, batched) alone: the header bakes it.
        """
        # Every record, not only the layout's own: a layout's records rarely reach every corner of
        # (M, N, K), each of a few or of thousands, where a call may fall. With the records of two
        # big nt shapes alone a call of four rows got their 128 x 256 tiles (0.11-0.48x cuBLAS); on
        # the H200, whose nt and tn records are a linear layer's ten shapes, borrowing only below
        # eight shapes gave 0.50x cuBLAS over a seeded draw of all four layouts, borrowing always
        # 0.60x, with the nn layout's choices at 1.02x and 1.03x.
        batched = problem.batch > 1
        alike, other = [], []
        for shape, fams in self.records:
            same = shape.layout == problem.layout and (shape.batch > 1) == batched
            (alike if same else other).append((shape, fams))
        return alike + other

    def _nearest_pool(self, problem: Problem) -> list[tuple[Problem, dict]]:
        """Return the records of the problem's layout and batching, else of its layout, else all."""
        batched = problem.batch > 1
        same = [(shape, fams) for shape, fams in self.records if shape.layout == problem.layout]
        alike = [(shape, fams) for shape, fams in same if (shape.batch > 1) == batched]
        return alike or same or self.records

    def nearest(self, problem: Problem, family: str | None) -> tuple[Problem, dict] | None:
        """Return the nearest tuned shape's best entry (of `family`) that can run the problem.

        Of its layout and batching where there is one, however far: the winner of a record as it
        was timed, which the model's choice is compared with.
        """
        best = None
        for shape, fams in self._nearest_pool(problem):
            pick = fastest(fams, lambda f: family in (None, f) and _reads(f, problem))
            entry = fams[pick] if pick is not None else None
            if entry and (best is None or model.distance(problem, shape) < model.distance(problem, best[0])):
                best = (shape, entry)
        return best

    def choose(
        self, problem: Problem, family: str | None, limits: DeviceLimits | None = None
    ) -> tuple[Problem, dict, Config, float | None] | None:
        """Return (tuned shape, its entry, the config to run, predicted ms) for `problem`, or None.

        The best entry of the problem's own record when it was tuned (predicted ms None); else the
        candidate of `_pool` -- every family's best at every tuned shape, that can run the problem and
        is meant for it (or is the family asked for) -- that dispatch/model.py predicts fastest here.
        Below the highest precision the shape's FP32 record is the tier's own too (its kernels meet
        every contract): the faster of the two records' best entries serves.
        """
        own = self._own(problem, family, limits)
        if own is not None:
            return own
        candidates = [
            c for shape, fams in self._pool(problem) for c in self._candidates(shape, fams, problem, family, limits)
        ]
        best = model.fastest(candidates, problem, self.roof)
        if best is None:
            return None
        shape, entry, cfg = best[0].what
        return shape, entry, cfg, best[1]

    def _own(self, problem: Problem, family: str | None, limits: DeviceLimits | None):
        """Return `choose`'s answer from the problem's own record (predicted ms None), or None."""
        # The shape's own records: those timed with beta 0 or not, as this call, first.
        same = problem.with_beta(0.0)
        exact = [
            ((shape.beta == 0) != (problem.beta == 0), shape, fams)
            for shape, fams in self.records
            if meets(shape.precision, problem.precision)
            and shape.with_beta(0.0).with_precision(problem.precision) == same
        ]
        for other_beta in (False, True):
            picks = []
            for _, shape, fams in (r for r in exact if r[0] == other_beta):
                pick = fastest(fams, lambda f: family in (None, f) and _reads(f, problem))
                if pick is not None:
                    entry = fams[pick]
                    cfg = built_for(entry_config(entry), problem.layout, problem.batch, problem.precision, limits)
                    if cfg is not None:
                        picks.append((entry["gflops"], shape, entry, cfg))
            if picks:
                _, shape, entry, cfg = max(picks, key=lambda p: p[0])
                return shape, entry, cfg, None
        return None

    def likeliest(self, problem: Problem, limits: DeviceLimits | None, count: int) -> list[Config]:
        """Return the `count` distinct configs predicted fastest at `problem`, fastest first.

        Empty for a shape with its own record (its best entry runs it: `choose`) or that none can run.
        """
        if count <= 0 or self._own(problem, None, limits) is not None:
            return []
        cands = [c for shape, fams in self._pool(problem) for c in self._candidates(shape, fams, problem, None, limits)]
        picked: dict[str, Config] = {}
        for c in sorted(cands, key=lambda c: c.predict_ms(problem, self.roof)):
            picked.setdefault(c.what[2].name, c.what[2])
            if len(picked) == count:
                break
        return list(picked.values())

    def settle(self, key: tuple, kernel) -> None:
        """Keep matmul's timed choice for `key`, dropping the oldest past _CHOICES_MAX."""
        if len(self.settled) >= _CHOICES_MAX:
            del self.settled[next(iter(self.settled))]
        self.settled[key] = kernel

    def _candidates(self, shape: Problem, fams: dict, problem: Problem, family: str | None, limits=None):
        """Yield a model.Candidate for each of `shape`'s entries that may run `problem`."""
        for f, entry in fams.items():
            if (
                family not in (None, f)
                or not _reads(f, problem)
                or (family is None and cached_family(f).unsuited(problem))
            ):
                continue
            try:
                cfg = built_for(entry_config(entry), problem.layout, problem.batch, problem.precision, limits)
                if cfg is None:
                    continue
                measured = self._plan(entry_config(entry))
                slots = model.slots(measured, entry["registers"], entry["smem_bytes"], entry["limits"])
                plan = self._plan(cfg)
                sms = entry["limits"]["sm_count"]
                yield model.Candidate(shape, measured, plan, entry["time_ms"], slots, sms, (shape, entry, cfg))
            except (UserError, KeyError, TypeError, ValueError):
                continue  # an entry from an older format, or a family no longer shipped

    def _plan(self, cfg: Config):
        """Return the config's launch plan, resolved once per table."""
        plan = self.plans.get(cfg.name)
        if plan is None:
            plan = self.plans[cfg.name] = cached_family(cfg.family).resolve(cfg).plan
        return plan

    @functools.cached_property
    def roof(self) -> model.Roof:
        """Return the roofline that the records' measured times draw."""
        return model.Roof.of(
            (shape, e["time_ms"]) for shape, fams in self.records for e in fams.values() if e.get("time_ms")
        )

    def remember(self, key: tuple, kernel: Kernel) -> Kernel:
        """Keep the kernel chosen for `key`, dropping the oldest choice past _CHOICES_MAX."""
        if len(self.choices) >= _CHOICES_MAX:
            del self.choices[next(iter(self.choices))]
        self.choices[key] = kernel
        return kernel


_TABLES: dict[tuple[str, str], _Table] = {}  # (results folder, GPU slug) -> its table


def table_for(results: str | Path | None, slug: str) -> _Table:
    """Return the table of `slug` in `results`, found with a stat or two.

    By default ($AUTOTUNE_RESULTS unset) the records of ./results with the shipped ones (the
    wheel's or the checkout's) beside them, for shapes ./results has no record of.
    """
    if results:
        return _table(os.fspath(results), slug)
    env = _ENVIRON.get(_RESULTS_VAR) if _ENVIRON is not None else os.environ.get("AUTOTUNE_RESULTS")
    if env:
        return _table(os.fsdecode(env), slug)
    # The two tables as one, kept while both are fresh: the default road's answer in one lookup.
    kept = _DEFAULT.get(slug)
    if (
        kept is not None
        and time.monotonic() < kept[0]
        and _TABLES.get(("results", slug)) is kept[1]
        and _TABLES.get((_SHIPPED, slug)) is kept[2]
    ):
        return kept[3]
    own, shipped = _table("results", slug), _table(_SHIPPED, slug)
    table = _beside(own, shipped)
    if own.clean and shipped.clean:
        _DEFAULT[slug] = (min(own.fresh_until, shipped.fresh_until), own, shipped, table)
    return table


# os.environ's own store (bytes names on POSIX): a lookup of a variable that is not set costs
# no KeyError raised and caught, as os.environ.get's does; the same values, set and unset the same.
_ENVIRON = getattr(os.environ, "_data", None) if os.name == "posix" else None
_RESULTS_VAR = b"AUTOTUNE_RESULTS"
# slug -> (fresh until, ./results's table, the shipped one, the two as one); _TABLES still holding
# those two tables is what keeps it: a table read again, or the tables dropped, is a miss.
_DEFAULT: dict[str, tuple] = {}


# slug -> (the user's table, the shipped one, the two as one): remade when either is read again.
_BESIDE: dict[str, tuple[_Table, _Table, _Table]] = {}


def _beside(own: _Table, shipped: _Table) -> _Table:
    """Return the user's records with the shipped ones of shapes the user has no record of."""
    # A shape the user tuned is theirs whole; the shipped tables fill in the rest, so a first
    # search of one shape does not hide what shipped for every other. Run in the checkout,
    # ./results is the shipped folder itself (the same device and inode).
    if shipped.state is None or shipped.state == own.state:
        return own
    if own.state is None:
        return shipped
    slug = os.path.basename(own.folder)
    kept = _BESIDE.get(slug)
    if kept is not None and kept[0] is own and kept[1] is shipped:
        return kept[2]
    shapes = {problem for problem, _ in own.records}
    records = own.records + [(problem, fams) for problem, fams in shipped.records if problem not in shapes]
    mine = {p.with_beta(0.0) for p in shapes}
    routes = own.routes | {p: r for p, r in shipped.routes.items() if p not in mine}
    table = _Table(own.folder, own.state, records, own.clean and shipped.clean, routes)
    _BESIDE[slug] = (own, shipped, table)
    return table


def _table(root: str, slug: str) -> _Table:
    """Return the records of `slug` under `root`, read again only when that folder changed.

    The folder is looked at once in RECHECK_S at most: a record written meanwhile is read by the
    first call after that.
    """
    table = _TABLES.get((root, slug))
    now = time.monotonic()
    if table is not None and table.clean and now < table.fresh_until:
        return table
    if table is None or not table.clean or table.state != _folder_state(table.folder):
        table = _TABLES[(root, slug)] = _read_table(root, slug)
    table.fresh_until = now + RECHECK_S
    return table


def _folder_state(folder: str) -> tuple[int, int, int] | None:
    """Return the folder's (device, inode, mtime), or None when there is no such folder."""
    try:
        st = os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None  # no such folder: no records (until it appears, which changes the state)
    except OSError as exc:  # there, but not to be looked at: not taken for a folder of no records
        raise UserError(f"{folder}: cannot read the GPU's results folder ({exc.strerror or exc})") from None
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


def _read_table(root: str, slug: str) -> _Table:
    """Read the records of `slug` under `root` into a new table."""
    # Read as the command line reads them (records/results.py): a record that is damaged,
    # contradicts itself, or holds a config its (shipped) family refuses raises one UserError
    # naming the file, as `autotune list` or `export` would say it; a folder with a bad record is
    # not used in part. A record's entry of a family not shipped here is no candidate (`_reads`).
    folder = os.path.join(root, slug)
    now = time.time_ns()  # before the stat: a change after it gets a later mtime once clean
    state = _folder_state(folder)
    records, routes = [], {}
    if state is not None:
        for path, rec in iter_records(root, slug):
            _check_configs(path, rec)
            problem = Problem(**rec["problem"])
            records.append((problem, rec["families"]))
            if rec.get("routes"):
                routes[problem.with_beta(0.0)] = rec["routes"]
    return _Table(folder, state, records, state is None or now - state[2] > _RACY_NS, routes)


def _check_configs(path: Path, record: dict) -> None:
    """Check each entry's config as its family takes it, else raise one UserError naming the record.

    Its parameters must be declared and their values in their domains. Entries of families not
    shipped here are left to `_reads`, which makes them no candidate.
    """
    for entry in record["families"].values():
        cfg = entry_config(entry)
        try:
            fam = cached_family(cfg.family)
        except UserError:
            continue
        try:
            fam.resolve(cfg, f"stored config {cfg.name}")
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
