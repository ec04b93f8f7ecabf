"""Strided batched GEMM without a GPU: the problem's name, which families run a batch and in which
form, batched kernels that compile and launch alone with the batch as grid z, headers that build
without warnings and refuse bad batches, and the checks on batched arrays that need no GPU."""

import subprocess
import sys

import pytest
from helpers import build_and_run_header_main, families, have_nvcc, refusals_main

from autotune.core.types import Config, Measurement, Problem, Status, UserError
from autotune.dispatch import table as dispatch_table
from autotune.gpu.compile import compile_source
from autotune.kernels.family import Family
from autotune.kernels.launch import LONGS
from autotune.kernels.limits import profile_for_arch
from autotune.kernels.render import render
from autotune.kernels.space import Space
from autotune.records.export import header_for_entry
from autotune.search.evaluate import prepare

LAYOUTS = ["nn", "nt", "tn", "tt"]
BATCHING = {"tiled", "coarse1d", "coarse2d", "vectorized", "warptile", "tiny", "panel"}  # fewrows / fewcols use grid z


def test_a_problem_names_its_batch():
    p = Problem(512, 512, 512, "nt", 64)
    assert p.name == "512x512x512_nt_b64"
    assert Problem.parse("512_b64") == Problem(512, 512, 512, "nn", 64)
    assert Problem.parse("512x256x128_tt_b3") == Problem(512, 256, 128, "tt", 3)
    assert Problem.parse("64", "nt", 8) == Problem(64, 64, 64, "nt", 8)
    assert Problem.parse("64_b2", "nn", 8).batch == 2  # the name wins
    assert Problem(8, 8, 8).as_dict() == {"M": 8, "N": 8, "K": 8, "layout": "nn"}  # records as before
    assert p.flops == 64 * 2 * 512**3 and p.pinned == {"TRANS_A": 0, "TRANS_B": 1, "BATCHED": 1, "PRECISION": "highest"}
    m = Measurement(Config.make("tiled", {"TILE": 16}), p, Status.OK)
    assert Measurement.from_dict(m.to_dict()).problem == p
    for bad in ("64_b0", "64_bx", "64_b", "64_nt_b2_x", "64_q"):
        with pytest.raises(UserError, match="batch must be|expected N or MxNxK"):
            Problem.parse(bad)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(UserError, match="batch must be an integer"):
            Problem(1, 1, 1, "nn", bad)


def test_which_families_run_a_batch():
    problem = Problem(8, 8, 8, "nn", 4)
    can = {f for f in families() if not Family.load(f).gaps(problem)}
    assert can == BATCHING
    assert "fewrows does not run a batch in one launch" in Family.load("fewrows").gaps(problem)[0]


def test_a_split_k_config_is_batched_in_its_data_parallel_form():
    """blockIdx.z is the batch: a config that splits K over it, or a split schedule, takes a batch
    with those parameters back at their defaults (one block per tile), the rest kept; for one
    matrix nothing else changes."""
    fam = Family.load("warptile")
    fallback = Space.load("warptile").fallback
    for change in ({"SPLITK": 4}, {"SCHEDULE": "stream_k"}, {"SCHEDULE": "split_fused"}):
        cfg = Config.make("warptile", {**fallback.as_dict(), **change})
        batched = dispatch_table.built_for(cfg, "tn", 2)
        assert not fam.broken_rules(batched)
        assert [batched[p] for p in ("TRANS_A", "BATCHED", "SPLITK", "SCHEDULE")] == [1, 1, 1, "data_parallel"]
        kept = ("TRANS_A", "BATCHED", "SPLITK", "SCHEDULE")
        assert {k: v for k, v in batched.params if k not in kept} == {k: v for k, v in cfg.params if k not in kept}
        assert dispatch_table.built_for(cfg, "nt") == fam.resolve({**cfg.as_dict(), "TRANS_B": 1}).config
    broken = Config.make("warptile", {**fallback.as_dict(), "BM": 96})  # a rule broken before: left as it is
    assert fam.broken_rules(fam.built_for(broken, Problem(8, 8, 8, "nn", 2)))


@pytest.mark.parametrize("family", sorted(BATCHING))
def test_batched_kernels_launch_alone_and_compile(family):
    """Built for a batch, in every layout: one step (no helper, no tail), grid z 1 at any shape
    (the launcher makes it the batch), the strides its last arguments; compiled without spills.
    The same config for one matrix has no stride arguments."""
    fam = Family.load(family)
    fallback = Space.load(family).fallback
    for layout in LAYOUTS:
        cfg = fam.built_for(fallback, Problem(1, 1, 1, layout, 2))
        assert not fam.broken_rules(cfg), (layout, fam.broken_rules(cfg))
        resolved = fam.resolve(cfg)
        assert resolved.plan.batched and resolved.plan.kernels == ("",)
        (step,) = resolved.plan.steps
        assert step.args[-3:] == LONGS
        for shape in ((1, 1, 1), (4097, 33, 5), (96, 100, 4000)):
            assert resolved.plan.geometry(*shape, slots=132).grid[2] == 1
        src = render(resolved)
        assert "long long stride_a, long long stride_b, long long stride_c" in src.replace("AT_BATCH_PARAMS", "")
        res = compile_source(src, "sm_90", "autotune_sgemm").resources
        assert res.spill_bytes == 0, (layout, res)
    single = fam.resolve(fam.built_for(fallback, Problem(1, 1, 1)))
    assert not single.plan.batched and all(a not in LONGS for s in single.plan.steps for a in s.args)


def test_a_kernel_built_for_one_matrix_is_not_timed_on_a_batch():
    """The runner times a batch as one launch: a config and a problem that disagree are rejected
    before anything is compiled."""
    h100 = profile_for_arch("sm_90")
    single = Space.load("tiled").fallback
    batched = dispatch_table.built_for(single, "nn", 8)
    (p,) = prepare([single], Problem(64, 64, 64, "nn", 8), h100, "sm_90", {})
    assert p.measurement.status is Status.REJECTED and "not a batch of 8" in p.measurement.message
    (p,) = prepare([batched], Problem(64, 64, 64), h100, "sm_90", {})
    assert p.measurement.status is Status.REJECTED and "built for a batch" in p.measurement.message


def test_a_batched_search_builds_its_spaces_for_the_batch():
    sp = Space.load("warptile").for_problem(Problem(256, 256, 256, "nt", 16))
    assert sp.values["BATCHED"] == [1] and sp.values["TRANS_B"] == [1]
    assert sp.fallback["BATCHED"] == 1 and all(s["BATCHED"] == 1 for s in sp.seeds)
    with pytest.raises(UserError, match="fewcols does not run a batch"):
        Space.load("fewcols").for_problem(Problem(256, 4, 256, "nn", 16))


HEADER_MAIN = refusals_main(
    """\
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda, 2048, B, ldb, 0, 0.0f, C, 64, 3072, 0, 0),
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda, -1, B, ldb, 0, 0.0f, C, 64, 3072, 2, 0),
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, C, 64, 100, 2, 0),
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, C, 64, 0, 2, 0),
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda, 4096, B, ldb, 0, 0.0f, C, 64, 3072, 3, 0),
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda, 0, B, ldb, 1536, 0.0f, C, 64, 3072, 4, 0),
        autotune_sgemm_strided_batched(ta, tb, 64, 48, 32, 1.0f, A, lda - 1, 0, B, ldb, 0, 0.0f, C, 64, 3072, 2, 0),
        autotune_sgemm_strided_batched(flip, tb, 64, 48, 32, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, C, 64, 3072, 2, 0),
        autotune_sgemm_strided_batched_row_major(48, 64, 32, 1.0f, B, ldb, 0, A, lda, 0, 0.0f, C, 64, 3072, -3, 0),
"""
)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize(
    ("family", "layout", "batch"),
    [("warptile", "nn", 8), ("warptile", "nt", 8), ("vectorized", "tt", 8), ("warptile", "tn", 1)],
)
def test_batched_header_builds_without_warnings_and_refuses_bad_batches(tmp_path, family, layout, batch):
    """The strided batched entry points of a header built for a batch (one launch) and of one
    built for a single matrix (a launch per matrix): no warnings under -Wall -Wextra and
    -warn-spills; batch < 1, negative strides, C's matrices on each other, and C within the span
    of A's or B's matrices refused."""
    fam = Family.load(family)
    problem = Problem(64, 48, 32, layout, batch)
    params = fam.built_for(Space.load(family).fallback, problem).as_dict()
    rec = {"problem": problem.as_dict(), "gpu": {"name": "test", "arch": "sm_90"}}
    entry = {"config": {"family": family, "params": params}, "gflops": 1.0, "ratio": 1.0}
    header = header_for_entry(rec, entry, "tuned.h")
    assert ("one launch per matrix" in header) == (batch == 1)
    build_and_run_header_main(tmp_path, header, HEADER_MAIN)


def test_matrices_apart():
    """out's matrices must not land on each other: stacked and interleaved (attention heads)
    batches pass, overlapping ones do not. Pure arithmetic, no GPU."""
    from autotune.dispatch.arrays import _apart

    assert _apart([(4, 120), (10, 12), (12, 1)])  # stacked 10 x 12 matrices
    assert _apart([(4, 12), (10, 48), (12, 1)])  # heads interleaved in rows of 48
    assert _apart([(1, 0), (10, 12), (12, 1)])  # one matrix: any stride
    assert not _apart([(4, 100), (10, 12), (12, 1)])  # matrix 1 starts inside matrix 0
    assert not _apart([(2, 0), (10, 12), (12, 1)])  # a broadcast out
    assert not _apart([(4, 6), (10, 48), (12, 1)])
    assert _apart([(4, -120), (10, 12), (12, 1)])  # a reversed batch


def test_cli_takes_a_batch(tmp_path):
    """search --batch and a shape ending in _b<B> name the same problem (a dry run, no GPU)."""
    for extra in (["--size", "64", "--batch", "3"], ["--sizes", "64_b3"]):
        r = subprocess.run(
            [sys.executable, "-m", "autotune.cli", "search", *extra, "--family", "tiled", "--dry-run", "--sample", "1"],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "dry run: 64x64x64_b3" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "search", "--size", "64", "--batch", "3", "--family", "fewrows"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "fewrows does not run a batch in one launch" in r.stderr
