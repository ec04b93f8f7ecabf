"""A beta other than 0 (C read and scaled) as a problem of its own: named, parsed, searched and
recorded apart, and chosen by the dispatch for calls with such a beta. No GPU: dry runs, a
replayed search, and the dispatch with its kernels faked."""

import json
import math
import shutil
import subprocess
import sys

import pytest
from helpers import RESULTS, fake_kernels, restamp

from autotune.core.types import Config, Measurement, Problem, Status, UserError
from autotune.dispatch import api
from autotune.kernels.limits import load_profile
from autotune.kernels.space import Space
from autotune.records import results, store

SLUG = "nvidia-h200"


def test_a_problem_names_its_beta():
    p = Problem(512, 512, 512, "nt", 64, 3)
    assert p.name == "512x512x512_nt_b64_beta3" and Problem.parse(p.name) == p
    assert Problem.parse("100x200x300_beta-0.5").beta == -0.5
    assert Problem.parse("64", beta=2.0) == Problem(64, 64, 64, beta=2) and Problem.parse("64_beta1", beta=2).beta == 1
    assert Problem.parse("64_beta0") == Problem(64, 64, 64) and Problem(8, 8, 8, beta=-0.0).name == "8x8x8"
    tiny = Problem(8, 8, 8, beta=1e-5)
    assert tiny.name == "8x8x8_beta1e-05" and Problem.parse(tiny.name) == tiny  # read back exactly
    assert Problem(8, 8, 8).as_dict() == {"M": 8, "N": 8, "K": 8, "layout": "nn"}  # records as before
    assert Problem(8, 8, 8, beta=3).as_dict()["beta"] == 3.0
    assert Problem(8, 8, 8, beta=3).bytes == Problem(8, 8, 8).bytes + 4 * 64  # C read as well
    m = Measurement(Config.make("tiled", {"TILE": 16}), p, Status.OK)
    assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))).problem == p
    for bad in (math.nan, math.inf, True, "3"):
        with pytest.raises(UserError, match="beta must be a finite number"):
            Problem(1, 1, 1, beta=bad)
    for bad in ("64_betax", "64_beta", "64_betanan", "64_beta1_beta2_nt_b2"):
        with pytest.raises(UserError, match="expected N or MxNxK"):
            Problem.parse(bad)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_takes_a_beta(tmp_path):
    """search --beta and a shape ending in _beta<B> name the same problem (a dry run)."""
    for extra in (["--size", "64", "--beta", "3"], ["--sizes", "64_beta3"]):
        r = _cli("search", *extra, "--family", "tiled", "--dry-run", "--sample", "1", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "dry run: 64x64x64_beta3" in r.stdout
    for bad in ("nan", "inf", "x"):
        r = _cli("search", "--size", "64", "--beta", bad, "--dry-run", cwd=tmp_path)
        assert r.returncode == 2 and "--beta" in r.stderr and "Traceback" not in r.stderr


def test_a_beta_search_is_recorded_apart(tmp_path):
    """A replayed search with --beta 3 writes its own record (the beta in its name and problem);
    the same shape at beta 0 keeps its record."""
    fam = "tiled"
    table = {c.name: 1000.0 + i for i, c in enumerate(Space.load(fam).enumerate(load_profile("h100")).valid)}
    replay = tmp_path / "table.json"
    replay.write_text(json.dumps({"table": table, "cublas_gflops": 2000}))
    out = tmp_path / "results"
    for beta in ("3", "0"):
        r = _cli("search", "--size", "64", "--family", fam, "--trials", "3", "--replay", str(replay),
                 "--results", str(out), "--beta", beta, "--quiet", cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.glob("*/*.json"))
    assert names == ["64x64x64.json", "64x64x64_beta3.json"]
    rec = results.load_record(next(out.glob("*/64x64x64_beta3.json")))
    assert rec["problem"]["beta"] == 3.0 and Problem(**rec["problem"]) == Problem(64, 64, 64, beta=3)


@pytest.fixture
def loads(monkeypatch) -> list[tuple]:
    return fake_kernels(monkeypatch, SLUG)


def test_a_call_with_beta_takes_the_record_searched_with_one(tmp_path, loads):
    """The shape's record timed with a beta for calls with beta != 0, the beta-0 record for the
    others; either one when the shape has only that."""
    root = tmp_path / "results"
    shutil.copytree(RESULTS / SLUG, root / SLUG)  # 4096^3 and 4097^3, beta 0
    data = json.loads((RESULTS / SLUG / "4096x4096x4096.json").read_text())
    data["problem"] = Problem(4096, 4096, 4096, beta=3).as_dict()
    data["families"], data["best"] = {"vectorized": data["families"]["vectorized"]}, "vectorized"
    store.atomic_write_text(root / SLUG / "4096x4096x4096_beta3.json", json.dumps(restamp(data)))
    _, name, source = api._choose(0, Problem(4096, 4096, 4096, beta=2.0), None, root)
    assert source == f"tuned for 4096x4096x4096_beta3 on {SLUG}" and name.startswith("vectorized_")
    _, name, source = api._choose(0, Problem(4096, 4096, 4096), None, root)
    assert source == f"tuned for 4096x4096x4096 on {SLUG}" and name.startswith("warptile_")
    _, _, source = api._choose(0, Problem(4097, 4097, 4097, beta=-1.0), None, root)  # only beta 0 tuned there
    assert source == f"tuned for 4097x4097x4097 on {SLUG}"
