"""Faults of the search machinery, without a GPU (the replay evaluator): a database killed while
it is made, storage lost mid-search, hostile YAML, killed workers, concurrent searches of one
study, report output, credentials and seeds."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.limits import load_profile
from autotune.space import Space

ROOT = Path(__file__).resolve().parent.parent
SLUG = "nvidia-h100-80gb-hbm3"


def _cli(*args, timeout=300, env=None):
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=env,
    )


def _one_line(r, code=2):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    return lines[0]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A replay table of coarse1d's valid points on the H100 (distinct GFLOP/s each)."""
    valid = Space.load("coarse1d").enumerate(load_profile("h100")).valid
    path = tmp_path_factory.mktemp("replay") / "table.json"
    path.write_text(json.dumps({"table": {c.name: 1000.0 + i for i, c in enumerate(valid)}, "cublas_gflops": 20000}))
    return path


def _search(results, table, *extra):
    return ["search", "--size", "512", "--family", "coarse1d", "--replay", str(table), "--results", str(results),
            "--quiet", "--yes", *extra]  # fmt: skip


# ---- seeds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["-1", "99999999999999999999", str(2**32), "1e3"])
def test_a_seed_out_of_range_is_one_line_before_anything_is_made(tmp_path, table, seed):
    line = _one_line(_cli(*_search(tmp_path / "r", table, "--trials", "3", f"--seed={seed}")))
    assert "--seed" in line and "4294967295" in line
    assert not (tmp_path / "r").exists()


def test_the_largest_seed_searches_with_workers_too(tmp_path, table):
    """Worker i samples with the seed plus a stride: past 2**32 - 1 it wraps, it does not fail."""
    r = _cli(*_search(tmp_path / "r", table, "--trials", "6", "--workers", "2", f"--seed={2**32 - 1}"))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "exited with an error" not in r.stderr + r.stdout
