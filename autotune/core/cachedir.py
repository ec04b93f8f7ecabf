"""autotune's caches on disk: NVRTC's cubins and reports, and counts of valid points.

A cache only saves time, so one that cannot be used costs only that: a file that cannot be read
is a miss, one that cannot be written is skipped silently, whatever the cause ($AUTOTUNE_CACHE
naming a file, a read-only or full disk, no home folder). No temporary file is left behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from .files import NotRegular, open_regular

try:
    import fcntl
except ImportError:  # not on Windows: there every process builds its own entries
    fcntl = None


def cache_root() -> Path | None:
    """Return the cache root, or None when none can be named (no home folder).

    It is `$AUTOTUNE_CACHE`, else `$XDG_CACHE_HOME/autotune`, else `~/.cache/autotune`.
    """
    env = os.environ.get("AUTOTUNE_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "autotune"
    try:
        return Path.home() / ".cache" / "autotune"
    except RuntimeError:  # no $HOME and no password entry for this user
        return None


def cache_folder(name: str) -> Path | None:
    """Return one cache's folder under the root (not made here: the first write makes it)."""
    root = cache_root()
    return None if root is None else root / name


def read_bytes(path: Path | None) -> bytes | None:
    """Return a cache file's bytes, or None (a miss) when it cannot be read as a regular file."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO there must not block
    except (OSError, ValueError):
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read() if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None
    except (OSError, ValueError):
        return None


def write_atomic(path: Path | None, data: bytes) -> bool:
    """Write a cache file whole or not at all (making its folder); False when it could not.

    It is written beside its place, then renamed, so a concurrent reader never sees half of it. The
    file gets the mode the umask gives, as any other: a cache may be shared by a team.
    """
    if path is None:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


@contextlib.contextmanager
def entry_lock(path: Path | None, wait_s: float = 300.0) -> Iterator[None]:
    """Hold a lock while one process builds a cache entry, so that others wait and read it instead.

    The GPU suite's shards, or test workers, compile the same kernels at the same time. Never an
    error: where the lock cannot be had (no folder, a read-only disk, no fcntl) or is held past
    `wait_s` (a stuck builder), the caller builds.

    Example:
        with entry_lock(folder / f"{key}.lock"):
            entry = read_bytes(folder / key) or build_and_write(folder / key)
    """
    fd = None
    if path is not None and fcntl is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_regular(path, os.O_RDWR | os.O_CREAT)  # no link followed, no FIFO waited on
        except (OSError, ValueError, NotRegular):
            fd = None
    held = False
    deadline = time.monotonic() + wait_s
    while fd is not None and not held:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        except OSError:
            break
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock; the empty file stays, as removing it races the next taker
