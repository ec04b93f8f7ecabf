"""A study's storage opened from its URL (SQLite, PostgreSQL, MySQL, in memory), and its failures
as one line with credentials masked.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from sqlalchemy.exc import SQLAlchemyError

from ..core import redact
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


def default_database(results_dir, gpu_slug: str) -> Path:
    """The SQLite file of a search's studies when no --storage is given: beside its records."""
    return Path(results_dir) / gpu_slug / "optuna.db"


def default_storage(results_dir, gpu_slug: str) -> str:
    path = default_database(results_dir, gpu_slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


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
    path = sqlite_file(url)
    if path is not None:
        check_files(path)  # no link followed, no pipe opened: before SQLite opens anything
        try:
            create_whole(path)
            repair(path)
        except (OSError, sqlite3.Error, SQLAlchemyError) as exc:
            raise StorageError(storage_failure(url, exc)) from None
    for attempt in range(_CREATE_TRIES):
        try:
            storage = (SQLiteStorage if url.startswith("sqlite:") else RDBStorage)(
                url,
                engine_kwargs=engine,
                heartbeat_interval=heartbeats.HEARTBEAT_S,
                grace_period=heartbeats.GRACE_S,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )
            break
        except Exception as exc:  # noqa: BLE001 - any storage failure is the user's URL or file
            if attempt + 1 < _CREATE_TRIES and lost_creation_race(exc):
                time.sleep(0.2 * (attempt + 1))
                continue
            raise StorageError(storage_failure(url, exc)) from None
    if url.startswith("sqlite:"):
        serialize_sqlite(storage.engine)
    _STORAGES[url] = storage
    return storage


_CREATE_TRIES = 4


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
