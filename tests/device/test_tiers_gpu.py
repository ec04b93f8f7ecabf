"""On the GPU: the tensor-core precision tiers meet their accuracy contracts at awkward
shapes and layouts, the contract rejects a kernel of a looser tier, and infinities and NaNs
reach C as they do in FP32."""

import random

import pytest
from helpers import AWKWARD_SHAPES, families

from autotune.core.types import Config, Problem, Status
from autotune.kernels.family import Family
from autotune.kernels.limits import load_profile
from autotune.kernels.space import Space

pytestmark = pytest.mark.gpu

TIER_FAMILIES = [f for f in families() if "PRECISION" in Family.load(f).params]

# The awkward shapes but the three largest (each shape sets up three float64 contract products).
SHAPES = [s for s in AWKWARD_SHAPES if s not in {(64, 64, 8192), (1023, 1021, 257), (2500, 4100, 100)}]


def _configs(precision: str, layout: str = "nn", batch: int = 1) -> list[Config]:
    """Each tier family's seeds, fallback and a few random valid points (fixed seed), built for
    the tier, layout and batch; at high with the FP32 accumulation, the one the contract is
    meant to pass (ACC=tc is measured in benchmarks, not asserted)."""
    lim = load_profile("h100")
    rng = random.Random(11)
    problem = Problem(8, 8, 8, layout, batch, precision=precision)
    out = []
    for fam in TIER_FAMILIES:
        sp = Space.load(fam)
        if sp.family.gaps(problem):  # e.g. wgmma_tf32 runs one matrix a launch
            continue
        picks = [*sp.seeds, sp.fallback, *rng.sample(sp.enumerate(lim).valid, 4)]
        for c in picks:
            params = {**c.as_dict(), "ACC": "fp32"} if precision == "high" and "ACC" in c.as_dict() else c.as_dict()
            cfg = sp.family.built_for(Config.make(fam, params), problem)
            if not sp.family.broken_rules(cfg):
                out.append(cfg)
    return list(dict.fromkeys(out))


# 3xTF32 represents each operand to about 2^-22 of itself, FP32 to 2^-24: where FP32's own sums
# add little error (K of a few dozen, or wide-range data whose few largest products dominate) it
# misses high's contract of 1.5x FP32's errors, and the search leaves it to the FP32 families.
# There the kernel must still be right to 3xTF32's accuracy (a wrong index errs by ~1).
HIGH_MISS_MAX = 1e-5


def _check(gpu_evaluator, problem: Problem, configs: list[Config]) -> None:
    ms = gpu_evaluator.evaluate(configs, problem, verify_only=True)
    ran = [m for m in ms if m.status is not Status.REJECTED]
    can = {f for f in TIER_FAMILIES if not Family.load(f).gaps(problem)}
    assert {m.config.family for m in ran} == can, [m.message for m in ms]

    def fine(m) -> bool:
        if m.status is Status.OK:
            return True
        rows = m.extra.get("contract") or []
        return (
            problem.precision == "high"
            and "misses the high contract" in m.message
            and m.error <= 1e-4
            and all(r["errors"][0] <= HIGH_MISS_MAX for r in rows)
        )

    bad = [f"{m.config.name}: {m.status.value} {m.message}" for m in ran if not fine(m)]
    assert not bad, "\n".join(bad)
    for m in ran:  # the contract ran on each kind of input; a passing kernel within its limits
        rows = m.extra["contract"]
        assert [r["kind"] for r in rows] == ["uniform", "normal", "wide"]
        ok = all(e <= lim for r in rows for e, lim in zip(r["errors"], r["limit"], strict=True))
        assert ok == (m.status is Status.OK)


@pytest.mark.parametrize("precision", ["high", "medium"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_tier_kernels_are_right_to_their_tier(gpu_evaluator, shape, precision):
    _check(gpu_evaluator, Problem(*shape, precision=precision), _configs(precision))


@pytest.mark.parametrize("precision", ["high", "medium"])
def test_tier_kernels_meet_their_contract_at_a_deep_k(gpu_evaluator, precision):
    problem = Problem(1000, 1000, 1000, precision=precision)
    ms = gpu_evaluator.evaluate(_configs(precision), problem, verify_only=True)
    bad = [f"{m.config.name}: {m.message}" for m in ms if m.status not in (Status.OK, Status.REJECTED)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layout", ["nt", "tn", "tt"])
@pytest.mark.parametrize("shape", [(127, 129, 131), (257, 1025, 33)], ids=lambda s: "x".join(map(str, s)))
def test_tier_kernels_read_every_layout_in_place(gpu_evaluator, shape, layout):
    _check(gpu_evaluator, Problem(*shape, layout, precision="high"), _configs("high", layout))


def test_tier_kernels_run_a_strided_batch(gpu_evaluator):
    _check(gpu_evaluator, Problem(67, 45, 33, "nn", 3, precision="medium"), _configs("medium", "nn", 3))


def test_the_high_contract_rejects_a_one_product_kernel():
    """A medium (one TF32 product) kernel run against high's contract, bypassing the static
    filter that would reject it: its errors, some 100x FP32's, are named in the reason."""
    from autotune.gpu.runner import Runner
    from autotune.search.evaluate import prepare

    fam = TIER_FAMILIES[0]
    sp = Space.load(fam)
    medium = sp.family.built_for(sp.fallback, Problem(8, 8, 8, precision="medium"))
    high = sp.family.built_for(sp.fallback, Problem(8, 8, 8, precision="high"))
    runner = Runner(0)
    runner.setup(512, 384, 640, precision="high")
    lim = load_profile("h100")
    specs = {}
    for cfg in (medium, high):
        (prep,) = prepare([cfg], Problem(512, 384, 640, precision=cfg["PRECISION"]), lim, "sm_90", {})
        assert prep.measurement is None, prep.measurement
        specs[cfg["PRECISION"]] = {k: v for k, v in prep.spec.items() if k != "resources"}
    v = runner.verify(specs["medium"])
    assert not v["correct"] and "misses the high contract" in v["reason"]
    assert all(kind in v["reason"] for kind in ("uniform", "normal", "wide"))
    # The three-product kernel on the same data: two orders of magnitude closer (whether it meets
    # the contract at this K depends on the data: see HIGH_MISS_MAX).
    high_rows = runner.verify(specs["high"])["contract"]
    for hi, lo in zip(high_rows, v["contract"], strict=True):
        assert hi["errors"][0] < lo["errors"][0] / 30 and hi["errors"][1] < lo["errors"][1] / 30, (hi, lo)


@pytest.mark.parametrize("precision", ["high", "medium"])
def test_infinities_and_nans_reach_c_as_in_fp32(precision):
    import cupy as cp

    import autotune

    fam = TIER_FAMILIES[0]
    sp = Space.load(fam)
    kernel = autotune.load(config=sp.family.built_for(sp.fallback, Problem(8, 8, 8, precision=precision)))
    rng = cp.random.default_rng(3)
    a = rng.standard_normal((70, 90), dtype=cp.float32)
    b = rng.standard_normal((90, 66), dtype=cp.float32)
    a[3, 5], a[10, 7], a[20, 8] = cp.inf, -cp.inf, cp.inf
    b[7, 9], b[2, 30], b[8, 40] = cp.nan, cp.inf, 0.0  # a[20, 8] * b[8, 40]: inf * 0, a NaN in FP32 too
    out, ref = kernel(a, b), a @ b
    for pattern in (cp.isnan, cp.isposinf, cp.isneginf):
        assert bool((pattern(out) == pattern(ref)).all()), pattern.__name__
    assert int(cp.isnan(ref).sum()) > 66 and int(cp.isinf(ref).sum()) > 66  # the cases were exercised


@pytest.mark.parametrize("precision, bound", [("high", 2e-6), ("medium", 2e-3)])
def test_matmul_at_a_tier_runs_the_wgmma_record_and_is_right(tmp_path, monkeypatch, precision, bound):
    """autotune.matmul(precision=...) at a shape whose tier record is a wgmma_tf32 kernel (written
    here for this GPU) runs that kernel -- operand preparation, workspace and all -- and its answer
    is as close to a float64 product as the tier promises; an FP32 call at the shape is not served
    by it. Hopper only."""
    import cupy as cp

    from autotune.core.types import Measurement
    from autotune.dispatch import api
    from autotune.dispatch import table as dispatch_table
    from autotune.records.results import live_gpu_slug
    from autotune.records.store import make_entry, update_record

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma_tf32 runs on sm_90 only")
    from autotune.cli.inputs import live_limits

    info = live_limits(0).to_dict()
    shape = Problem(1000, 777, 300, precision=precision)
    cfg = Space.load("wgmma_tf32").family.built_for(Space.load("wgmma_tf32").fallback, shape)
    m = Measurement(cfg, shape, Status.OK, time_ms=0.05, gflops=shape.flops / 0.05e6, error=1e-7, registers=168)
    m.spill_bytes, m.smem_bytes = 0, 66560
    cublas = {"time_ms": 0.1, "gflops": shape.flops / 0.1e6, "error": 1e-7}
    entry = make_entry(m, cublas, search={}, versions={}, command="test", limits=info)
    gpu = {"name": info["name"], "slug": live_gpu_slug(), "arch": info["arch"]}
    update_record(tmp_path, gpu, shape, {"wgmma_tf32": entry})
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(tmp_path))
    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    rng = cp.random.default_rng(3)
    a = rng.random((1000, 300), dtype=cp.float32) * 2 - 1
    b = rng.random((300, 777), dtype=cp.float32) * 2 - 1
    c = api.matmul(a, b, precision=precision)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
    assert err <= bound, err
    chosen = api._choose(0, Problem(1000, 777, 300, precision=precision))
    assert chosen.config.family == "wgmma_tf32", chosen
    fp32 = api._choose(0, Problem(1000, 777, 300))
    assert fp32.config.family != "wgmma_tf32"


# (M, N, K), the layout, the floats of padding after each row of A and B, and of offset before
# A: tensor maps of both operands (tails in M, N and K; pitches wider than the rows), or a pitch or
# an address that rules them out (the producer warps copy the tiles themselves).
IN_PLACE = [
    ((200, 300, 100), "nn", 0, 0),
    ((200, 300, 100), "nn", 4, 0),
    ((300, 200, 257), "nn", 3, 0),
    ((130, 140, 64), "nn", 4, 1),
    ((1000, 776, 300), "nt", 0, 0),
    ((300, 200, 257), "nt", 3, 0),
    ((200, 300, 100), "nt", 2, 0),
    ((257, 130, 96), "nt", 0, 1),
]


IN_PLACE_IDS = [f"{'x'.join(map(str, s))}-{lay}-pad{p}-at{o}" for s, lay, p, o in IN_PLACE]


@pytest.mark.parametrize("shape, layout, pad, offset", IN_PLACE, ids=IN_PLACE_IDS)
def test_medium_reading_both_operands_in_place_is_as_accurate_as_the_prepared_kernel(shape, layout, pad, offset):
    """DIRECT=1 (tiles copied from A and B as they lie, rounded to TF32 by the copy engine or by
    the producer warps) against the prepared form on the same data: as close to the float64
    product, at every pitch, alignment and tail, in both layouts it reads (nn: C^T = B^T A^T;
    nt: the prepared form's consumers)."""
    import cupy as cp

    import autotune

    M, N, K = shape
    rng = cp.random.default_rng(5)
    a = rng.standard_normal((M, offset + K + pad), dtype=cp.float32)[:, offset : offset + K]
    if layout == "nt":
        b = rng.standard_normal((N, K + pad), dtype=cp.float32)[:, :K].T
    else:
        b = rng.standard_normal((K, N + pad), dtype=cp.float32)[:, :N]
    fam = Family.load("wgmma_tf32")
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    errs = []
    for direct in (0, 1):
        params = dict(BM=128, BN=128, STAGES=3, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=direct)
        cfg = fam.built_for(Config.make("wgmma_tf32", params), Problem(8, 8, 8, layout, precision="medium"))
        assert cfg["DIRECT"] == direct and not fam.broken_rules(cfg)
        c = autotune.load(config=cfg)(a, b)
        errs.append(float(cp.abs(c - ref).max() / cp.abs(ref).max()))
    assert errs[1] < 2e-3 and errs[1] <= 1.5 * errs[0], errs


# (N, floats of C's row pitch past N, floats of offset before C, beta): the nn DIRECT epilogue's
# 8-byte stores after a shuffle (N, ldc and C's address all even) and its 4-byte ones (an odd
# pitch, an odd address, an odd N), with beta 0 (C holds NaN: never read) and beta 3.
EPILOGUE = [(136, 0, 0, 0.0), (130, 2, 2, 3.0), (130, 1, 0, 3.0), (130, 2, 1, 3.0), (129, 3, 0, 0.0), (136, 4, 0, 3.0)]


@pytest.mark.parametrize("N, extra, offset, beta", EPILOGUE, ids=lambda v: str(v))
def test_medium_nn_writes_c_at_every_pitch_and_alignment(N, extra, offset, beta):
    """medium nn reading in place (consumers compute C^T = B^T A^T) writes alpha * A @ B + beta * C
    at every pitch, address and tail of C, and not one float outside C's columns."""
    import cupy as cp

    import autotune

    M, K = 200, 96
    rng = cp.random.default_rng(7)
    a = rng.standard_normal((M, K), dtype=cp.float32)
    b = rng.standard_normal((K, N), dtype=cp.float32)
    base = rng.standard_normal((M, offset + N + extra), dtype=cp.float32)
    if beta == 0.0:
        base[:, offset : offset + N] = cp.nan
    before = base.copy()
    c = base[:, offset : offset + N]
    fam = Family.load("wgmma_tf32")
    params = dict(BM=128, BN=128, STAGES=3, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=1)
    cfg = fam.built_for(Config.make("wgmma_tf32", params), Problem(8, 8, 8, "nn", precision="medium"))
    assert fam.derive(cfg.as_dict())["TRANSPOSED"] == 1
    autotune.load(config=cfg)(a, b, out=c, alpha=0.5, beta=beta)
    c0 = cp.nan_to_num(before[:, offset : offset + N].astype(cp.float64)) if beta else 0.0
    ref = 0.5 * (a.astype(cp.float64) @ b.astype(cp.float64)) + beta * c0
    err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
    assert err < 2e-3, err
    assert bool((base[:, :offset] == before[:, :offset]).all()) and bool(
        (base[:, offset + N :] == before[:, offset + N :]).all()
    )
