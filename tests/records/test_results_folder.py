"""A results folder is shared and passed around, so what stands in it is input too: every file
autotune opens or creates there (records, their lock, the SQLite storage and what SQLite makes
beside it, temporary files) is a regular file of its own, never a link followed nor a pipe
waited on; and a folder or record that cannot be read is said, never shown as no results.
tests/hostile_cases.py holds the same as commands (search --replay, list, export, check, report)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autotune.core.files import NotRegular, open_regular, refuse_odd
from autotune.core.types import Problem, UserError
from autotune.records.results import gpu_dirs, iter_records, load_record
from autotune.records.store import LOCK_NAME, update_record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import hostile_cases
from hostile_cases import ROOT, SLUG, record

HANG_GUARD_S = 60  # opening a pipe once waited for a writer for ever


def _kinds(folder: Path) -> dict[str, Path]:
    """A link to a file, a link to nothing, a pipe and a folder, each where a file belongs."""
    (folder / "target").write_text("not autotune's")
    (folder / "link").symlink_to(folder / "target")
    (folder / "dangling").symlink_to(folder / "nowhere")
    os.mkfifo(folder / "pipe")
    (folder / "dir").mkdir()
    return {k: folder / k for k in ("link", "dangling", "pipe", "dir")}


@pytest.mark.parametrize("kind, words", [("link", "a symbolic link"), ("dangling", "a symbolic link"),
                                         ("pipe", "a pipe"), ("dir", "a folder")])  # fmt: skip
@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_WRONLY | os.O_CREAT | os.O_APPEND, os.O_RDWR | os.O_CREAT])
def test_open_regular_neither_follows_nor_waits(tmp_path, kind, words, flags):
    path = _kinds(tmp_path)[kind]
    with pytest.raises(NotRegular) as exc:
        os.close(open_regular(path, flags))
    assert str(exc.value).startswith(f"{path}: is {words}, not a regular file") and exc.value.kind == words
    with pytest.raises(NotRegular):
        refuse_odd(path)
    assert (tmp_path / "target").read_text() == "not autotune's" and not (tmp_path / "nowhere").exists()


def test_open_regular_opens_and_makes_regular_files_blocking(tmp_path):
    refuse_odd(tmp_path / "absent")  # nothing there: fine
    fd = open_regular(tmp_path / "new", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        assert os.get_blocking(fd) and os.write(fd, b"x") == 1
    finally:
        os.close(fd)
    refuse_odd(tmp_path / "new")
    assert (tmp_path / "new").read_bytes() == b"x"


def _victim(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE mine (x)")
    db.commit()
    db.close()
    return path


def _tables(path: Path) -> list[str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    finally:
        db.close()


@pytest.mark.parametrize("name", ["x.db", "x.db-wal", "x.db-shm", "x.db-journal", "x.db.lock"])
def test_a_storage_with_a_link_planted_beside_it_is_refused_before_sqlite_opens_it(tmp_path, name):
    from autotune.search.storage import make_storage

    victim = _victim(tmp_path / "victim.db")
    (tmp_path / name).symlink_to(victim)
    with pytest.raises(UserError, match=f"{name}: is a symbolic link, not a regular file"):
        make_storage(f"sqlite:///{tmp_path / 'x.db'}")
    assert _tables(victim) == ["mine"]
    assert (tmp_path / "x.db").is_symlink() if name == "x.db" else not (tmp_path / "x.db").exists()  # none made


def test_the_records_lock_a_link_or_a_pipe_is_refused_and_nothing_written(tmp_path):
    record(tmp_path)  # a valid record to merge into
    folder = tmp_path / "results" / SLUG
    stored = (folder / "64x64x64.json").read_text()
    data = load_record(folder / "64x64x64.json")
    entry = data["families"]["tiled"]
    for planted in ("link", "pipe"):
        lock = folder / LOCK_NAME
        lock.unlink(missing_ok=True)
        lock.symlink_to(tmp_path / "created") if planted == "link" else os.mkfifo(lock)
        with pytest.raises(UserError, match=f"{LOCK_NAME}: is a"):
            update_record(tmp_path / "results", data["gpu"], Problem(64, 64, 64), {"tiled": entry}, replace=True)
        assert not (tmp_path / "created").exists() and (folder / "64x64x64.json").read_text() == stored


def test_a_folder_named_as_a_gpus_that_cannot_be_listed_is_not_taken_for_no_results(tmp_path, monkeypatch):
    """Under root chmod stops no read: the listing itself is made to fail as it does for others."""
    record(tmp_path)
    root = tmp_path / "results"
    (root / "lost+found").mkdir()  # not a GPU's folder by its name: left alone when unreadable
    real = os.listdir

    def listdir(path="."):
        if Path(path).name in (SLUG, "lost+found"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    assert gpu_dirs(root) == [SLUG]
    with pytest.raises(UserError, match=f"{SLUG}: cannot read the GPU's results folder \\(Permission denied\\)"):
        list(iter_records(root, SLUG))


_MATMUL_TABLE = """
import sys
from autotune.core.types import Problem, UserError
from autotune.dispatch.table import nearest_entry
try:
    nearest_entry(Problem(64, 64, 64), sys.argv[1], sys.argv[2])
    print("no error")
except UserError as exc:
    print(exc)
"""


@pytest.fixture
def open_folder():
    """A folder 'nobody' can reach (pytest's own are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="autotune-results-folder-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_matmuls_table_says_a_folder_cannot_be_read(open_folder):
    """autotune.matmul's choice of a kernel once took an unreadable folder for one of no records
    and ran the fallback; it raises, as the commands say it (run as 'nobody' under root)."""
    folder = open_folder
    record(folder)
    for p in [folder, *folder.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o666)
    (folder / "results" / SLUG).chmod(0o000)
    demote = hostile_cases._as_nobody() if os.geteuid() == 0 else []
    try:
        r = subprocess.run(
            [*demote, sys.executable, "-c", _MATMUL_TABLE, SLUG, str(folder / "results")],
            env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder)}, capture_output=True, text=True,
            timeout=HANG_GUARD_S,
        )  # fmt: skip
    finally:
        (folder / "results" / SLUG).chmod(0o755)
    assert r.stdout.strip() == f"{folder / 'results' / SLUG}: cannot read the GPU's results folder (Permission denied)"
