"""On the GPU: candidates that fault or hang cost only themselves; the search goes on."""

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from autotune.records.results import load_record

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def test_broken_candidates_are_recorded_and_the_search_completes(tmp_path):
    env = dict(os.environ, AUTOTUNE_TEMPLATES=str(ROOT / "tests" / "data" / "broken"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune.cli",
            "search",
            "--size",
            "300",
            "--family",
            "broken",
            "tiled",
            "--sampler",
            "grid",
            "--trials",
            "9",
            "--candidate-timeout",
            "8",
            "--results",
            str(tmp_path),
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    (rec_path,) = tmp_path.glob("*/300x300x300.json")
    rec = load_record(rec_path)
    assert rec["families"]["broken"]["config"]["params"]["MODE"] == 0  # only a correct one can win
    assert rec["families"]["tiled"]["status"] == "ok"  # searched after the faults, unaffected
    url = f"sqlite:///{rec_path.parent}/optuna.db"
    status = {}
    for name in optuna.get_all_study_names(url):
        for t in optuna.load_study(study_name=name, storage=url).trials:
            if t.user_attrs.get("evaluated"):
                status[t.user_attrs["config"]] = t.user_attrs["status"]
    for tile in (8, 16, 32):
        assert status[f"broken_MODE0_TILE{tile}"] == "ok"
        assert status[f"broken_MODE1_TILE{tile}"] == "launch_failed"
        assert status[f"broken_MODE2_TILE{tile}"] == "timeout"
    assert "GPU worker replaced 6 time(s)" in r.stdout
