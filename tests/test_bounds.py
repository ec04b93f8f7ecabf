"""The house's size bounds: notes are findings by topic (at most 60 KB together), the measurement
records under 1 MB, and everything tracked under 3 MiB (a record, a note or a log row added past a
bound is paid for by condensing, not by letting the checkout grow)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bytes(paths) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def test_the_notes_and_the_measurement_records_stay_within_their_bounds():
    notes = _bytes((ROOT / "notes").glob("*.md"))
    assert 0 < notes <= 60_000, f"notes/ holds {notes:,} bytes: condense it to 60 KB"
    logs = _bytes((ROOT / "benchmarks" / "logs").rglob("*"))
    assert 0 < logs < 1_000_000, f"benchmarks/logs holds {logs:,} bytes: prune run folders to git"


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="not a git checkout")
def test_everything_tracked_stays_under_3_mib():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    tracked = _bytes(ROOT / name for name in listed.decode().split("\0") if name)
    assert tracked > 1_000_000  # the listing was read
    assert tracked <= 3 * 2**20, f"{tracked:,} bytes tracked, over 3 MiB: condense notes or prune INDEX rows"
