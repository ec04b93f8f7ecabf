"""SQLite as a study's storage shared by several processes.

A database file made whole, repaired after an interrupted creation, and transactions that
serialize writers across processes while reads of the trials take no lock (a write-ahead log).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

from optuna.storages import RDBStorage
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import make_url
from sqlalchemy.schema import CreateIndex

from ..core.files import NotRegular, open_regular, refuse_odd


def sqlite_file(url: str) -> Path | None:
    """Return the file of a SQLite URL (sqlite:///, sqlite+pysqlite:///), or None.

    None for another database, SQLite in memory, or a name SQLite reads as a URI (`uri=true`), whose
    file is SQLite's to find.
    """
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - a malformed URL: opening it says what is wrong
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or "uri" in parsed.query:
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


# What SQLite (its rollback journal, write-ahead log and shared memory) and autotune (the writers'
# lock) make beside a database.
COMPANIONS = ("-journal", "-wal", "-shm", ".lock")


def check_files(path: Path) -> None:
    """Check that the database at `path` and the files beside it are each a regular file or absent.

    A symbolic link planted at one would have Optuna's tables, SQLite's log or the lock written
    wherever it points (another program's database), and a pipe would hang its opening. Anything
    else is one UserError naming it (files.NotRegular), before the database is opened.
    """
    for file in (path, *(Path(f"{path}{end}") for end in COMPANIONS)):
        refuse_odd(file)


@contextlib.contextmanager
def _creation_lock(path: Path):
    """Hold the writers' lock of `path` while it is made or repaired; yield whether it is held."""
    try:
        f = os.fdopen(open_regular(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+b")
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


# Optuna makes its schema one statement at a time, each committed on its own: a process killed
# among them (kill -9, Ctrl-C in the first tenths of a second of a search) left a table without
# its index, and the next runs, finding the tables there, never made it; without the unique index
# on study names every retry added a study row of the same name and failed on it. So the schema is
# made in a temporary file beside the database and linked (or renamed) into place: the file is
# there whole, or not at all.
def create_whole(path: Path) -> None:
    """Bring a new SQLite database into place whole: its schema made beside it, then linked in."""
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


def repair(path: Path) -> None:
    """Put back the indexes a database made by an earlier, interrupted run lacks (see create_whole).

    The study rows its retries added twice (those with no trials) are dropped first; the first of
    each name is kept.
    """
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


def lost_creation_race(exc: BaseException) -> bool:
    """Whether creating a storage failed as another process made the same new database at once.

    Optuna creates the tables and stamps the schema's version when it opens a file that has none,
    and the second of two processes doing so (two searches started together, or a reader of the
    study) finds the version stamped or a table there. Opening the storage again then finds the
    schema whole.
    """
    text = str(exc)
    return "alembic_version" in text or ("already exists" in text and "table" in text)


_READING = threading.local()  # set while this thread runs one of Optuna's reads of trials


# `_get_trials` is private to Optuna, and overridden here because every read of trials passes
# through it: the public `get_all_trials` calls it, and so does Optuna's cache in front of an RDB
# storage (`_CachedStorage`, the storage every Study reads through), which calls its backend's
# `_get_trials` directly, so no public method sees those reads. pyproject.toml bounds Optuna below
# 6 for it; should a release rename or bypass it, the reads would take the write lock again
# (correct, but the workers of a host read one at a time), and
# tests/search/test_search.py::test_reads_through_optunas_cache_take_no_write_lock fails.
class SQLiteStorage(RDBStorage):
    """Optuna's RDB storage, its reads of trials marked as reads (see serialize_sqlite)."""

    def _get_trials(self, *args, **kwargs):
        return as_read(super()._get_trials, *args, **kwargs)

    def get_trial(self, trial_id):
        return as_read(super().get_trial, trial_id)


def as_read(method, *args, **kwargs):
    _READING.on = True
    try:
        return method(*args, **kwargs)
    finally:
        _READING.on = False


# SQLite has no SELECT ... FOR UPDATE, so two processes can both pop the same queued trial
# (WAITING -> RUNNING). Taking the write lock when each transaction begins makes Optuna's
# read-then-update atomic across processes (SQLAlchemy's recipe for pysqlite). A read of the trials
# takes no lock where the file has a write-ahead log: it reads a snapshot while one process writes.
# With every transaction holding the lock, the reads (TPE reads the whole study for every trial) of
# all the workers of a host ran one at a time, and two workers were no faster than one.
def serialize_sqlite(engine) -> None:
    """Make each SQLite transaction of `engine` take the write lock when it begins, reads aside."""
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

    writers = _WritersLock(engine.url.database)

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection):
        if wal and getattr(_READING, "on", False):
            connection.exec_driver_sql("BEGIN")
            return
        writers.take(connection.connection)  # the pool's proxy, as do_commit gets it
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:  # no transaction, so no COMMIT or ROLLBACK will let go of the lock
            writers.let_go(connection.connection)
            raise

    # Let go once SQLite has let go: after the COMMIT or ROLLBACK itself (SQLAlchemy's events of
    # those names come before it, when the next writer would still find the file busy).
    dialect = engine.dialect
    dialect.do_commit = writers.after(dialect.do_commit)
    dialect.do_rollback = writers.after(dialect.do_rollback)

    engine.dispose()  # connections opened before the listeners are dropped


# Writers queue on a lock of the operating system first: SQLite's own wait for a busy file polls
# with sleeps of 1 to 100 ms, and with a few dozen short writes a trial (each parameter, attribute
# and heartbeat) two workers lost more time asleep than they saved. The kernel hands this lock over
# at once. One file per connection: threads of a process (the heartbeats) exclude each other too.
class _WritersLock:
    """An operating-system lock that a SQLite file's writers queue on, one file per connection."""

    def __init__(self, database: str | None):
        self.path = f"{database}.lock" if database and database != ":memory:" else None
        self.held: dict[int, Any] = {}  # id of a connection's pool proxy -> its lock file, held

    def take(self, proxied_connection) -> None:
        if self.path is None:
            return
        info = proxied_connection.info
        try:
            if "lock" not in info:  # kept open: it lives as long as the connection
                info["lock"] = os.fdopen(open_regular(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+b")
            fcntl.flock(info["lock"].fileno(), fcntl.LOCK_EX)
        except (OSError, NotRegular):  # a folder that cannot hold it, a file system without flock, a link
            self.path = None  # SQLite's own wait alone, as before
        else:
            self.held[id(proxied_connection)] = info["lock"]

    def let_go(self, proxied_connection) -> None:
        lock = self.held.pop(id(proxied_connection), None)
        if lock is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def after(self, end):
        """Wrap `end` (the dialect's commit or rollback) to let go of the lock after it."""

        def wrapped(proxied_connection):
            try:
                end(proxied_connection)
            finally:
                self.let_go(proxied_connection)

        return wrapped
