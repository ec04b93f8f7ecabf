"""A study's storage opened from its URL, and its failures as one line with credentials masked."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import warnings
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SAWarning, SQLAlchemyError

from ..core import redact
from ..core.files import default_database, default_database_url
from ..core.types import UserError
from . import heartbeats
from .sqlite import (
    SQLiteStorage,
    check_files,
    create_whole,
    lost_creation_race,
    repair,
    serialize_sqlite,
    sqlite_file,
)


def default_storage(results_dir, gpu_slug: str) -> str:
    """Return the URL of the default database (default_database), making its folder."""
    default_database(results_dir, gpu_slug).parent.mkdir(parents=True, exist_ok=True)
    return default_database_url(results_dir, gpu_slug)


_STORAGES: dict[str, optuna.storages.BaseStorage] = {}


def make_storage(url: str):
    """Return an RDB storage with heartbeats for `url` (or for "memory:NAME", one in memory).

    Any URL SQLAlchemy opens serves (SQLite, PostgreSQL, MySQL); "memory:NAME" is for replays. One
    storage per URL and process: each new RDB storage costs an engine and a schema check.

    Raises:
        StorageError: The URL cannot be opened. No file is left behind: it is checked before a
            SQLite file is made, and what the attempt made is removed.
    """
    if url.startswith("memory:"):
        return _STORAGES.setdefault(url, optuna.storages.InMemoryStorage())
    cached = _STORAGES.get(url)
    path = sqlite_file(url)
    if cached is not None and (path is None or path.exists()):
        return cached
    sqlite = _backend(url) == "sqlite"
    engine = {"connect_args": {"timeout": 60}} if sqlite else {"pool_pre_ping": True}
    _check_url(url, engine)
    new = [] if path is None else [p for p in _files_of(path) if not os.path.lexists(p)]
    try:
        storage = _open(url, path, engine)
    except StorageError:
        for p in new:  # the database this attempt began, its journal and its lock
            with contextlib.suppress(OSError):
                p.unlink()
        raise
    if sqlite:
        serialize_sqlite(storage.engine)
    _STORAGES[url] = storage
    return storage


def _backend(url: str) -> str | None:
    """Return the database a URL names ("sqlite" for sqlite:/// and sqlite+pysqlite:///) or None."""
    try:
        return make_url(url).get_backend_name()
    except Exception:  # noqa: BLE001 - not a URL: _check_url says why
        return None


def _check_url(url: str, engine: dict) -> None:
    """Refuse a URL SQLAlchemy cannot open, or whose arguments the driver would ignore.

    This covers its form, its driver, an argument of the wrong type, before anything is made:
    SQLAlchemy reads them all when it makes an engine, which connects to nothing yet.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SAWarning)  # "argument(s) ... are being ignored"
            create_engine(url, **engine).dispose()
    except Exception as exc:  # noqa: BLE001 - any failure is the user's URL
        raise StorageError(storage_failure(url, exc)) from None


def _files_of(path: Path) -> list[Path]:
    """Return a SQLite database's file and those SQLite and this module put beside it."""
    return [path, *(path.with_name(path.name + end) for end in ("-journal", "-wal", "-shm", ".lock"))]


def _open(url: str, path: Path | None, engine: dict):
    """Return the storage of a checked URL, its SQLite file made whole (or repaired) first."""
    if path is not None:
        check_files(path)  # no link followed, no pipe opened: before SQLite opens anything
        try:
            create_whole(path)
            repair(path)
        except (OSError, sqlite3.Error, SQLAlchemyError) as exc:
            raise StorageError(storage_failure(url, exc)) from None
    attempt = 0
    while True:
        try:
            return (SQLiteStorage if _backend(url) == "sqlite" else RDBStorage)(
                url,
                engine_kwargs=engine,
                heartbeat_interval=heartbeats.HEARTBEAT_S,
                grace_period=heartbeats.GRACE_S,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )
        except Exception as exc:  # noqa: BLE001 - any storage failure is the user's URL or file
            attempt += 1
            if attempt < _CREATE_TRIES and lost_creation_race(exc):
                time.sleep(0.2 * attempt)
                continue
            raise StorageError(storage_failure(url, exc)) from None


_CREATE_TRIES = 4


def storage_failure(url: str, exc: BaseException) -> str:
    """Return one line for a storage that failed: the URL and the error, credentials masked."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return redact.text(f"storage {redact.url(str(url))!r}: {type(exc).__name__}: {first}", redact.secrets(str(url)))


class StorageError(UserError):
    """A storage that cannot be opened or failed: one line (storage_failure), exit 2."""


# What a storage that fails mid-search raises: the database's own errors through SQLAlchemy
# (a dropped connection, a full disk: "database or disk is full"), Optuna's wrapping of a failed
# commit, the operating system's (ENOSPC), or a StorageError from opening it again.
STORAGE_FAULTS = (StorageError, SQLAlchemyError, optuna.exceptions.StorageInternalError, OSError)


def fault_line(url: str, exc: BaseException) -> str:
    """Return one line for a fault among STORAGE_FAULTS, credentials masked."""
    if isinstance(exc, StorageError):
        return str(exc)
    if isinstance(exc, OSError):
        return redact.text(f"{type(exc).__name__}: {exc}"[:300], redact.secrets(str(url)))
    return storage_failure(url, exc)
