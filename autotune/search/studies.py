"""Optuna studies: their storage, names and samplers, a family's plan and its queue, and the
recovery of trials left behind by workers that died.

One study per (GPU, shape, family, space): its name carries a hash of the value lists and the
template text, so a changed space or template never collides with an old study, and the same
command resumes the same study. Several workers (processes, GPUs, hosts) share one study through
Optuna's RDB storage: each records heartbeats for its trials in flight, so the trials of a worker
that was killed are failed and re-queued with the same parameters
(RetryHeartbeatStaleTrialCallback) and run once by whoever asks next. The grid sampler is a
queue: every planned point is enqueued once and popped by exactly one worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import random
import sqlite3
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import (
    RDBStorage,
    RetryHeartbeatStaleTrialCallback,
    fail_stale_trials,
)
from optuna.trial import TrialState
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateIndex

from ..core import redact
from ..core.types import Config, Problem, UserError
from ..kernels.space import Space
from . import cost

SAMPLERS = ("tpe", "random", "grid")
TPE_STARTUP = 10  # tpe: random trials before the model; asked at once, they need no results
STARTUP_POLL_S = 0.25  # a worker waiting for the others' start-up looks again after this
HEARTBEAT_S, GRACE_S = 2, 8  # a worker silent for GRACE_S has its trials failed and re-queued
optuna.logging.set_verbosity(optuna.logging.WARNING)
# Heartbeats and the retry callback are marked experimental; they are what makes workers safe.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")


def default_storage(results_dir, gpu_slug: str) -> str:
    path = Path(results_dir) / gpu_slug / "optuna.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def study_name(gpu_slug: str, problem: Problem, space: Space, sampler: str) -> str:
    # The template's text is part of the name: after an edit, the configs measured before are
    # other code and are measured again (a resumed study would skip them).
    # A cold search (no seeds) is kept apart from seeded ones, which would hand it their trials.
    key = {"values": space.values, "sampler": sampler, "template": space.family.fingerprint}
    # So is one that starts from priors (configs measured on other GPUs).
    key |= {"cold": True} if space.cold else {}
    key |= {"priors": sorted(c.name for c in space.priors)} if space.priors else {}
    blob = json.dumps(key, sort_keys=True)
    return f"{gpu_slug}/{problem.name}/{space.family.name}/{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


def make_sampler(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    if kind == "tpe":
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=TPE_STARTUP, constant_liar=True, multivariate=True
        )
    if kind in ("random", "grid"):  # grid points come from the queue; random only fills a race
        return optuna.samplers.RandomSampler(seed=seed)
    raise UserError(f"unknown sampler {kind!r}; choose from {', '.join(SAMPLERS)}")


_STORAGES: dict[str, optuna.storages.BaseStorage] = {}


def make_storage(url: str):
    """An RDB storage with heartbeats (sqlite, postgresql, mysql), "memory:NAME" for a study
    that lives in this process only (replays), else the URL as given. One per URL and process:
    each new RDB storage costs an engine and a schema check."""
    if url.startswith("memory:"):
        return _STORAGES.setdefault(url, optuna.storages.InMemoryStorage())
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        return url
    cached = _STORAGES.get(url)
    if cached is not None and (not url.startswith("sqlite:///") or Path(url[len("sqlite:///") :]).exists()):
        return cached
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite:") else {"pool_pre_ping": True}
    path = _sqlite_file(url)
    if path is not None:
        try:
            _create_whole(path)
            _repair(path)
        except (OSError, sqlite3.Error, SQLAlchemyError) as exc:
            raise StorageError(storage_failure(url, exc)) from None
    for attempt in range(_CREATE_TRIES):
        try:
            storage = (_SQLiteStorage if url.startswith("sqlite:") else RDBStorage)(
                url,
                engine_kwargs=engine,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )
            break
        except Exception as exc:  # noqa: BLE001 - any storage failure is the user's URL or file
            if attempt + 1 < _CREATE_TRIES and _lost_creation_race(exc):
                time.sleep(0.2 * (attempt + 1))
                continue
            raise StorageError(storage_failure(url, exc)) from None
    if url.startswith("sqlite:"):
        _serialize_sqlite(storage.engine)
    _STORAGES[url] = storage
    return storage


_CREATE_TRIES = 4


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database, or SQLite in memory)."""
    if not url.startswith("sqlite:"):
        return None
    try:
        database = make_url(url).database
    except Exception:  # noqa: BLE001 - a malformed URL: opening it says what is wrong
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


@contextlib.contextmanager
def _creation_lock(path: Path):
    """The lock the writers of `path` queue on (see _serialize_sqlite), held while it is made or
    repaired; yields whether it is held (a file system without flock: not)."""
    try:
        f = open(f"{path}.lock", "a+b")
    except OSError:
        yield False
        return
    with f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _create_whole(path: Path) -> None:
    """A new SQLite database comes into place whole. Optuna makes its schema one statement at a
    time, each committed on its own: a process killed among them (kill -9, Ctrl-C in the first
    tenths of a second of a search) left a table without its index, and the next runs, finding
    the tables there, never made it; without the unique index on study names every retry added
    a study row of the same name and failed on it. So the schema is made in a temporary file
    beside the database and linked (or renamed) into place: the file is there whole, or not at
    all."""
    if path.exists():
        return
    with _creation_lock(path) as locked:
        if path.exists():  # made meanwhile by another process
            return
        if locked:  # no one else is making one: what is left is a killed process's
            for stale in path.parent.glob(f".{path.name}.*.new*"):
                stale.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
        try:
            made = RDBStorage(f"sqlite:///{tmp}")  # the schema, its version stamped
            made.engine.dispose()
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # never over a database another process put there
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links: the lock keeps others out
                if not path.exists():
                    os.replace(tmp, path)
        finally:
            for leftover in path.parent.glob(f"{tmp.name}*"):
                leftover.unlink(missing_ok=True)


def _repair(path: Path) -> None:
    """Put back the indexes a database made by an earlier, interrupted run lacks (see
    _create_whole), after dropping the study rows its retries added twice (those with no
    trials; the first of each name is kept)."""
    try:
        from optuna.storages._rdb import models
    except ImportError:  # another Optuna: its own checks stand
        return
    with contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=60)) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    wanted = [i for t in models.BaseModel.metadata.sorted_tables if t.name in tables for i in t.indexes]
    if all(i.name in indexes for i in wanted):
        return
    with _creation_lock(path), contextlib.closing(sqlite3.connect(path, timeout=60)) as db:
        db.isolation_level = None
        db.execute("BEGIN IMMEDIATE")
        try:
            if "ix_studies_study_name" not in indexes and {"studies", "trials"} <= tables:
                _drop_repeated_studies(db)
            for index in wanted:
                db.execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=sqlite_dialect.dialect())))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def _drop_repeated_studies(db) -> None:
    repeated = db.execute(
        "SELECT study_id FROM studies s WHERE EXISTS (SELECT 1 FROM studies f WHERE f.study_name = s.study_name "
        "AND f.study_id < s.study_id) AND NOT EXISTS (SELECT 1 FROM trials t WHERE t.study_id = s.study_id)"
    ).fetchall()
    for (sid,) in repeated:
        for table in ("study_directions", "study_user_attributes", "study_system_attributes", "studies"):
            db.execute(f"DELETE FROM {table} WHERE study_id = ?", (sid,))


def _lost_creation_race(exc: BaseException) -> bool:
    """Whether creating a storage failed because another process created the same new database
    at the same moment: Optuna creates the tables and stamps the schema's version when it opens
    a file that has none, and the second of two processes doing so (two searches started
    together, or a reader of the study) finds the version stamped or a table there. Opening the
    storage again then finds the schema whole."""
    text = str(exc)
    return "alembic_version" in text or ("already exists" in text and "table" in text)


_READING = threading.local()  # set while this thread runs one of Optuna's reads of trials


class _SQLiteStorage(RDBStorage):
    """Optuna's RDB storage, its reads of trials marked as reads (see _serialize_sqlite)."""

    def _get_trials(self, *args, **kwargs):
        return _as_read(super()._get_trials, *args, **kwargs)

    def get_trial(self, trial_id):
        return _as_read(super().get_trial, trial_id)


def _as_read(method, *args, **kwargs):
    _READING.on = True
    try:
        return method(*args, **kwargs)
    finally:
        _READING.on = False


def _serialize_sqlite(engine) -> None:
    """SQLite has no SELECT ... FOR UPDATE, so two processes can both pop the same queued trial
    (WAITING -> RUNNING). Taking the write lock when each transaction begins makes Optuna's
    read-then-update atomic across processes (SQLAlchemy's recipe for pysqlite). A read of the
    trials takes no lock where the file has a write-ahead log: it reads a snapshot while one
    process writes. With every transaction holding the lock, the reads (TPE reads the whole
    study for every trial) of all the workers of a host ran one at a time, and two workers
    were no faster than one."""
    from sqlalchemy import event

    wal = []

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        # Optuna commits once per parameter of a trial (21 for warptile) and per attribute; in
        # the default journal each commit waits for the disk twice, which made most of a
        # trial's host time. With a write-ahead log a commit is an append, synced at
        # checkpoints: a study survives a killed process (not a power cut mid-checkpoint).
        # Where the file system cannot hold a WAL (the pragma answers another mode), commits
        # stay as they were.
        if dbapi_connection.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() == "wal":
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")
            wal.append(True)

    path = engine.url.database
    lock_path = f"{path}.lock" if path and path != ":memory:" else None
    no_os_lock: list[bool] = []

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection):
        if wal and getattr(_READING, "on", False):
            connection.exec_driver_sql("BEGIN")
            return
        # Writers queue on a lock of the operating system first: SQLite's own wait for a busy
        # file polls with sleeps of 1 to 100 ms, and with a few dozen short writes a trial
        # (each parameter, attribute and heartbeat) two workers lost more time asleep than
        # they saved. The kernel hands this lock over at once. One file per connection:
        # threads of a process (the heartbeats) exclude each other too.
        if lock_path is not None and not no_os_lock:
            info = connection.connection.info
            try:
                if "lock" not in info:
                    info["lock"] = open(lock_path, "a+b")  # kept open: it lives as long as the connection
                fcntl.flock(info["lock"].fileno(), fcntl.LOCK_EX)
            except OSError:  # a folder that cannot hold it, or a file system without flock
                no_os_lock.append(True)  # SQLite's own wait alone, as before
            else:
                held[id(connection.connection)] = info["lock"]  # the pool's proxy, as do_commit gets it
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:  # no transaction, so no COMMIT or ROLLBACK will let go of the lock
            _let_go(connection.connection)
            raise

    # Let go once SQLite has let go: after the COMMIT or ROLLBACK itself (SQLAlchemy's events of
    # those names come before it, when the next writer would still find the file busy).
    held: dict[int, Any] = {}
    dialect = engine.dialect

    def _let_go(proxied_connection) -> None:
        lock = held.pop(id(proxied_connection), None)
        if lock is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _after(end):
        def wrapped(proxied_connection):
            try:
                end(proxied_connection)
            finally:
                _let_go(proxied_connection)

        return wrapped

    dialect.do_commit = _after(dialect.do_commit)
    dialect.do_rollback = _after(dialect.do_rollback)

    engine.dispose()  # connections opened before the listeners are dropped


def open_study(storage, name: str, sampler) -> optuna.Study:
    try:
        return optuna.create_study(
            study_name=name, storage=storage, sampler=sampler, direction="maximize", load_if_exists=True
        )
    except Exception as exc:  # noqa: BLE001 - whatever the storage raises, the user's URL or file is at fault
        raise StorageError(storage_failure(getattr(storage, "url", storage), exc)) from None


def storage_failure(url: str, exc: BaseException) -> str:
    """One line for a storage that failed: the URL and the error's first line, credentials masked."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return redact.text(f"storage {redact.url(str(url))!r}: {type(exc).__name__}: {first}", redact.secrets(str(url)))


class StorageError(UserError):
    """A storage that cannot be opened or failed: one line (storage_failure), exit 2."""


# What a storage that fails mid-search raises: the database's own errors through SQLAlchemy
# (a dropped connection, a full disk: "database or disk is full"), Optuna's wrapping of a failed
# commit, the operating system's (ENOSPC), or a StorageError from opening it again.
STORAGE_FAULTS = (StorageError, SQLAlchemyError, optuna.exceptions.StorageInternalError, OSError)


def fault_line(url: str, exc: BaseException) -> str:
    """One line for a fault among STORAGE_FAULTS, credentials masked."""
    if isinstance(exc, StorageError):
        return str(exc)
    if isinstance(exc, OSError):
        return redact.text(f"{type(exc).__name__}: {exc}"[:300], redact.secrets(str(url)))
    return storage_failure(url, exc)


class Heartbeat:
    """Records a heartbeat for every trial this process has in flight."""

    def __init__(self, storage):
        self.storage = storage if isinstance(storage, RDBStorage) else None
        self.ids: set[int] = set()
        self._stop = threading.Event()
        if self.storage is not None:
            threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for tid in list(self.ids):
                try:
                    self.storage.record_heartbeat(tid)
                except Exception:  # noqa: BLE001 - a missed beat only risks a retry
                    pass

    def add(self, trial: optuna.Trial) -> None:
        self.ids.add(trial._trial_id)
        if self.storage is not None:
            self.storage.record_heartbeat(trial._trial_id)

    def done(self, trial: optuna.Trial) -> None:
        self.ids.discard(trial._trial_id)

    def close(self) -> None:
        self._stop.set()


@dataclass
class Plan:
    """What every worker of one family's search shares."""

    space: Space
    problem: Problem
    valid: list[Config]
    name: str
    sampler: str
    seed: int
    budget: int
    storage_url: str
    # With no seeds, the start-up the static cost model ranks best (cost.startup) instead of
    # random draws; the neighbour phase then follows the model too (`ranked`). Empty where it
    # does not apply, and in a worker's plan (the parent queued it).
    startup: list[Config] = dataclasses.field(default_factory=list)
    ranked: bool = False

    @functools.cached_property
    def valid_by_name(self) -> dict[str, Config]:
        return {c.name: c for c in self.valid}

    def open(self) -> optuna.Study:
        """The plan's study (created on first use), with its sampler."""
        return open_study(make_storage(self.storage_url), self.name, make_sampler(self.sampler, self.seed))


def make_plan(
    space: Space,
    problem: Problem,
    limits,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = "tpe",
    seed: int = 0,
    queued_by_parent: bool = False,
    workers: int = 1,
    window: int = TPE_STARTUP,
) -> Plan:
    """Enumerate the space (its layout parameters fixed to the problem's) and name the study;
    no storage is touched. A seed that breaks its template's rules or lies outside the value
    lists is a mistake in the space file (an error); one that is right as written but not here
    -- built for the problem's tier or layout it breaks a rule (a medium seed's tiles do not fit
    high's shared memory), or it exceeds this device's limits -- is left out, as is one written
    for another layout (Space.seeds_for). `queued_by_parent`: a worker's plan, whose start-up
    the parent ranks and queues (the worker needs only whether the model ranks this search).
    `workers`: the processes that will share the study, `window`: the trials each has in flight
    (a start-up of max(TPE_STARTUP, window) each: a first window wider than TPE's start-up would
    otherwise be filled by TPE's random draws, most of them outside the valid space)."""
    written = space.seeds_for(problem)
    space = written.for_problem(problem)
    fam = space.family
    en = space.enumerate(limits)
    if not en.valid:
        raise UserError(space.describe_empty(en))
    valid = {c.name for c in en.valid}
    kept = []
    for seed_cfg, as_written in zip(space.seeds, written.seeds, strict=True):
        if seed_cfg.name in valid:
            if seed_cfg not in kept:  # a layout's own seed may be another's built for it
                kept.append(seed_cfg)
            continue
        outside = [
            f"{p}={v!r} not in the value list"
            for p, v in as_written.params
            if v not in written.values[p] and p not in written.seed_layout(as_written)
        ]
        mistakes = fam.broken_rules(as_written) + outside
        if mistakes:
            what = f"{space.source}: seed {as_written.name} is not a valid point of the space"
            raise UserError(f"{what}: " + "; ".join(mistakes))
    # Priors (built for this problem: a nearest record may be of another layout) are tried after
    # the seeds, where they are valid here; with no seeds the model's start-up follows them (a
    # few configs of other GPUs do not make a start-up).
    priors = list(dict.fromkeys(fam.built_for(c, problem) for c in space.priors))
    priors = [c for c in priors if c.name in valid and c not in kept]
    ranked = sampler == "tpe" and not kept and cost.applies(fam, en.valid)
    # With several workers, a start-up a worker: each one's first window is the model's picks.
    count = max(TPE_STARTUP, window) * workers
    startup = cost.startup(fam, en.valid, problem, limits, count, seed) if ranked and not queued_by_parent else []
    space = dataclasses.replace(space, seeds=kept + priors, priors=priors)
    return Plan(
        space,
        problem,
        en.valid,
        study_name(gpu_slug, problem, space, sampler),
        sampler,
        seed,
        min(trials, len(en.valid)),
        storage,
        startup,
        ranked,
    )


# grid: points queued at a time. A queued trial costs a write (about 4 ms on SQLite): the whole
# of warptile's space up front would take most of an hour before the first compile.
GRID_CHUNK = 2000


def queue_plan(plan: Plan) -> int:
    """Open (or resume) the study and queue the seeds (or with none, the model's start-up) not yet
    measured, and for grid the plan's next GRID_CHUNK points (a seeded shuffle after the seeds,
    so a partial grid is an unbiased sample; a worker whose queue runs dry calls this again).
    Returns how many trials it queued."""
    space = plan.space
    study = plan.open()
    measured = measured_configs(study)
    index_of = {c.name: i for i, c in enumerate(plan.valid)}
    order = list(dict.fromkeys([*space.seeds, *plan.startup]))  # the model may rank a prior first too
    if plan.sampler == "grid":
        # Every point queued before, in any state, is not queued again.
        queued = {t.user_attrs.get("config") for t in study.get_trials(deepcopy=False) if t.user_attrs.get("planned")}
        seeds = set(space.seeds)
        rest = [c for c in plan.valid if c not in seeds]
        # One order for the study, whoever queues the next chunk: each worker process samples
        # with a seed of its own, and its own shuffle would queue points past the budget.
        order_seed = study.user_attrs.get("grid_order_seed")
        if order_seed is None:
            order_seed = plan.seed
            study.set_user_attr("grid_order_seed", order_seed)
        random.Random(order_seed).shuffle(rest)
        order = [c for c in (order + rest)[: plan.budget] if c.name not in queued][:GRID_CHUNK]
    else:
        queued = {t.user_attrs.get("config") for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))}
    n = 0
    for cfg in order:
        if cfg.name in measured or cfg.name in queued:
            continue
        params = {"index": index_of[cfg.name]} if plan.sampler == "grid" else cfg.as_dict()
        study.enqueue_trial(params, user_attrs={"config": cfg.name, "planned": True})
        n += 1
    return n


def plan_family(space: Space, problem: Problem, limits, **kwargs) -> Plan:
    plan = make_plan(space, problem, limits, **kwargs)
    queue_plan(plan)
    return plan


def next_queued(plan: Plan, n: int) -> list[Config]:
    """The configs of the first `n` trials waiting in the plan's study: what the next asks get."""
    waiting = plan.open().get_trials(deepcopy=False, states=(TrialState.WAITING,))
    names = [t.user_attrs.get("config") for t in sorted(waiting, key=lambda t: t.number)]
    by_name = plan.valid_by_name
    return [by_name[c] for c in names if c in by_name][:n]


def measured_configs(study: optuna.Study, trials=None) -> dict[str, tuple[TrialState, float | None]]:
    """Config name -> (state, value) of every config measured in the study, by any worker
    (among `trials` where the caller has read them already)."""
    out = {}
    if trials is None:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    for t in trials:
        cname = t.user_attrs.get("config")
        if cname and t.user_attrs.get("evaluated") and t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            out[cname] = (t.state, t.value)
    return out


class TrialReader:
    """What changed in a study since the last read: the trials that are new, have changed state,
    or are running (whose attributes change: a config is named after the ask). A loop reads the
    study before every config it runs (trials.TrialLoop.refresh); read whole each time, a study of
    a few hundred trials cost 40 ms a read (Optuna's cache reloads every unfinished trial, and a
    grid's queue is hundreds of waiting ones). Here each read lists the ids and states alone, and
    loads the few trials that changed (an RDB storage; another storage is read whole)."""

    def __init__(self, study: optuna.Study):
        self.study = study
        self.seen: dict[int, TrialState] = {}  # trial id -> state when last loaded

    def changed(self, mine: set[int] = frozenset()) -> list[optuna.trial.FrozenTrial]:
        """The trials new or changed since the last call, but those of `mine` (trial ids the
        caller has in flight, which it knows) while they are running."""
        storage = getattr(self.study, "_storage", None)
        storage = getattr(storage, "_backend", storage)  # Optuna's cache in front of an RDB storage
        if not isinstance(storage, RDBStorage):
            return self.study.get_trials(deepcopy=False)
        states = _as_read(_trial_states, storage, self.study._study_id)
        ids = {i for i, s in states.items() if (s == TrialState.RUNNING and i not in mine) or self.seen.get(i) != s}
        if not ids:
            return []
        trials = storage._get_trials(self.study._study_id, None, ids, max(states))
        self.seen.update((t._trial_id, t.state) for t in trials)
        return trials


def _trial_states(storage: RDBStorage, study_id: int) -> dict[int, TrialState]:
    """Trial id -> state of every trial of a study, read in one query of two columns."""
    from optuna.storages._rdb import models
    from sqlalchemy import select

    table = models.TrialModel.__table__
    with storage.engine.connect() as connection:
        rows = connection.execute(select(table.c.trial_id, table.c.state).where(table.c.study_id == study_id))
        return {tid: TrialState[s] if isinstance(s, str) else TrialState(s) for tid, s in rows}


def recover_stale(study: optuna.Study, wait: bool) -> None:
    """Fail (and so re-queue) the trials of workers that stopped beating; with `wait`, give
    trials left RUNNING by a killed process the grace period to go stale first."""
    try:
        fail_stale_trials(study)
        if wait and study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            time.sleep(GRACE_S + HEARTBEAT_S)
            fail_stale_trials(study)
    except (ValueError, NotImplementedError):
        return  # a storage without heartbeats
    # A worker killed between asking a trial and its first heartbeat leaves a RUNNING trial
    # with no heartbeat, which Optuna never calls stale. Live workers name a trial's config
    # within milliseconds of asking, so one still unnamed after the grace period is orphaned.
    # It has no parameters yet: failing it loses nothing.
    cutoff = datetime.now() - timedelta(seconds=GRACE_S)
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if "config" not in t.user_attrs and t.datetime_start is not None and t.datetime_start < cutoff:
            try:
                study.tell(t.number, state=TrialState.FAIL)
            except (ValueError, RuntimeError):
                pass  # told meanwhile
