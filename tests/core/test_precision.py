"""The precision axis without a GPU: names, parsing, which families serve which tier, the
static rejection of a kernel built for another tier, and the command line."""

import json
import subprocess
import sys

import pytest
from helpers import ROOT, restamp

from autotune.core.types import Problem, Status, UserError
from autotune.kernels.family import Family
from autotune.kernels.limits import load_profile
from autotune.kernels.space import Space
from autotune.records.results import load_record
from autotune.search.evaluate import prepare


def test_a_problem_names_and_reads_back_its_precision():
    p = Problem(4096, 4096, 4096, "nt", 2, 3.0, "high")
    assert p.name == "4096x4096x4096_nt_b2_beta3_high" and Problem.parse(p.name) == p
    assert Problem.parse("64_medium") == Problem(64, 64, 64, precision="medium")
    assert Problem.parse("64_highest") == Problem(64, 64, 64) and Problem(8, 8, 8).name == "8x8x8"
    assert Problem(8, 8, 8).as_dict() == {"M": 8, "N": 8, "K": 8, "layout": "nn"}  # records as before
    assert Problem(8, 8, 8, precision="medium").as_dict()["precision"] == "medium"
    assert Problem.parse("64", precision="high").precision == "high"
    assert p.with_beta(0).precision == "high" and p.with_layout("nn").precision == "high"
    with pytest.raises(UserError, match="precision must be one of highest, high, medium"):
        Problem(1, 1, 1, precision="low")
    for bad in ("64_high_medium", "64_nt_tn", "64_b2_b3", "64_low"):
        with pytest.raises(UserError, match="expected N or MxNxK"):
            Problem.parse(bad)


def test_fp32_families_serve_every_tier_and_tensor_core_ones_only_theirs():
    warptile, mma = Family.load("warptile"), Family.load("mma_tf32")
    for tier in ("highest", "high", "medium"):
        assert not warptile.gaps(Problem(64, 64, 64, precision=tier))
    assert "not highest" in mma.gaps(Problem(64, 64, 64))[0]
    assert not mma.gaps(Problem(64, 64, 64, precision="high"))
    # A search pins PRECISION (seeds and fallback too) like the layout.
    space = Space.load("mma_tf32").for_problem(Problem(64, 64, 64, "tn", precision="medium"))
    assert space.values["PRECISION"] == ["medium"] and space.values["TRANS_A"] == [1]
    assert all(c["PRECISION"] == "medium" for c in [*space.seeds, space.fallback])
    with pytest.raises(UserError, match="computes at precision high, medium, not highest"):
        Space.load("mma_tf32").for_problem(Problem(64, 64, 64))


def test_a_kernel_built_for_another_tier_is_rejected_before_it_runs():
    sp = Space.load("mma_tf32")
    high = sp.family.built_for(sp.fallback, Problem(8, 8, 8, precision="high"))
    lim = load_profile("h100")
    for problem in (Problem(64, 64, 64), Problem(64, 64, 64, precision="medium")):
        (prep,) = prepare([high], problem, lim, "sm_90", {})
        assert prep.measurement.status is Status.REJECTED
        assert f"built for precision high, not {problem.precision}" in prep.measurement.message
    (prep,) = prepare([high], Problem(64, 64, 64, precision="high"), lim, "sm_90", {})
    assert prep.measurement is None and prep.spec["resources"]["spill_bytes"] == 0
    # An FP32 kernel serves a looser tier.
    fp32 = Space.load("warptile").fallback
    (prep,) = prepare([fp32], Problem(64, 64, 64, precision="medium"), lim, "sm_90", {})
    assert prep.measurement is None


def test_a_record_of_a_tier_reads_back(tmp_path):
    rec = json.loads(next((ROOT / "tests" / "data" / "results").glob("*/*.json")).read_text())
    folder = tmp_path / rec["gpu"]["slug"]  # a record is read in its GPU's folder
    folder.mkdir()
    rec["problem"] = {**rec["problem"], "precision": "high"}
    restamp(rec)  # its entries of that tier too
    path = folder / f"{Problem(**rec['problem']).name}.json"
    path.write_text(json.dumps(rec))
    assert path.name.endswith("_high.json") and load_record(path)["problem"]["precision"] == "high"
    wrong = folder / path.name.replace("_high", "_medium")
    wrong.write_text(json.dumps(rec))
    with pytest.raises(UserError, match="holds"):
        load_record(wrong)


def test_the_command_line_takes_a_precision(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, cwd=tmp_path, timeout=600
        )

    r = run("search", "--size", "64", "--precision", "high", "--family", "mma_tf32", "--dry-run", "--sample", "8")
    assert r.returncode == 0, r.stderr
    assert "64x64x64_high" in r.stdout and "mma_tf32" in r.stdout
    r = run("search", "--size", "64", "--family", "mma_tf32", "--dry-run")
    assert r.returncode == 2 and "not highest" in r.stderr and "Traceback" not in r.stderr
    r = run("search", "--size", "64", "--precision", "low", "--dry-run")
    assert r.returncode == 2 and "invalid choice" in r.stderr
