"""Files in a folder others can write: each one autotune opens there is a regular file of its own.

A results folder is committed, shared and passed around, so a file there is never a symbolic link
followed (a planted link would have autotune write into whatever it points to) and never a pipe
or a device (opening a pipe waits for a writer, for ever). What is there instead is one UserError
naming it: before any work when the caller checks first (`refuse_odd`), and at the latest when
the file is opened (`open_regular`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .types import UserError


def file_kind(mode: int) -> str:
    """Say what a file of this mode is, in words ('a symbolic link', 'a pipe', 'a folder', ...)."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a pipe"))
    kinds += ((stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def odd_kind(path: Path | str) -> str | None:
    """Say what stands at `path` if not a regular file (a link is not followed); else None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # nothing there, or nothing that can be looked at: opening it says why
        return None
    return None if stat.S_ISREG(mode) else file_kind(mode)


class NotRegular(UserError):
    """What stands where autotune keeps a regular file of its own: `path`, and `kind` in words."""

    def __init__(self, path: Path | str, kind: str):
        super().__init__(f"{path}: is {kind}, not a regular file: not followed or opened (remove it)")
        self.path, self.kind = path, kind


def refuse_odd(path: Path | str) -> None:
    """Check that nothing, or a regular file, is at `path`; anything else raises NotRegular."""
    kind = odd_kind(path)
    if kind is not None:
        raise NotRegular(path, kind)


_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_regular(path: Path | str, flags: int, mode: int = 0o666) -> int:
    """Return `os.open(path, flags, mode)` of a regular file only.

    A symbolic link at `path` is not followed, and a pipe or a device is not opened, nor waited on
    when one replaced the file since it was looked at. The descriptor is blocking as usual once open.

    Raises:
        NotRegular: Something other than a regular file stands at `path`.
        OSError: Any other failure, as raised.
    """
    refuse_odd(path)
    try:
        fd = os.open(path, flags | _FLAGS, mode)
    except OSError as exc:
        # ELOOP: a link (O_NOFOLLOW); ENXIO: a pipe with no reader, opened to write; EISDIR.
        kind = odd_kind(path) if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR) else None
        if kind is not None:
            raise NotRegular(path, kind) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(path, file_kind(st.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def default_database(results_dir, gpu_slug: str) -> Path:
    """Return the SQLite file of a search's studies where no --storage is given (beside records)."""
    return Path(results_dir) / gpu_slug / "optuna.db"


def default_database_url(results_dir, gpu_slug: str) -> str:
    """Return default_database's URL, the storage a search names where no --storage is given."""
    return f"sqlite:///{default_database(results_dir, gpu_slug)}"
