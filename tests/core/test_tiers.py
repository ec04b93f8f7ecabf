"""A precision tier is one definition (autotune.core.tiers): the built-in tiers' numbers, and a tier
registered here reaching every place a tier matters without other code edited."""

import random

import pytest
from helpers import GPU
from helpers import record_entry as _entry

from autotune.cli import build_parser
from autotune.core.tiers import PRECISIONS, TIERS, Tier, U, meets, register, tier, unregister
from autotune.core.types import Problem, UserError
from autotune.dispatch.fuzz import Case, bound_factor, draw
from autotune.kernels.family import Family
from autotune.records.export import export
from autotune.records.store import update_record
from autotune.search.cost import applies

LOOSE = Tier(
    "loose",
    bar="TF32",
    contract=4.0,
    bar_slack=6.0,
    tolerance=5e-3,
    bound=lambda K: 2.0**-7 + 3 * K * U,
    share=100,
    c_name="loose TF32 tensor-core (a test's tier)",
    help="a looser tier than medium, for a test",
)


@pytest.fixture
def loose():
    register(LOOSE)
    try:
        yield LOOSE
    finally:
        unregister("loose")


def test_the_built_in_tiers_keep_their_numbers():
    """The tiers as the runner, Kernel.verify and the fuzzer held them before they were one
    definition: the same bounds to the bit, the same tolerances, bars, factors and shares."""
    assert tuple(PRECISIONS) == ("highest", "high", "medium") and PRECISIONS == ("highest", "high", "medium")
    for K in (1, 2, 7, 33, 1000, 4096, 123457, 2**31 - 1):
        n = (K + 2) * U
        assert bound_factor("highest", K) == n / (1 - n)
        assert bound_factor("high", K) == 3.01 * 2.0**-22 + 2 * (3 * K + 4) * U
        assert bound_factor("medium", K) == 2.0**-9 + 2 * (K + 4) * U
    got = {t.name: (t.bar, t.contract, t.bar_slack, t.tolerance, t.share, t.strict) for t in TIERS.values()}
    assert got == {
        "highest": ("FP32", None, None, 1e-4, 70, True),
        "high": ("FP32", 1.5, None, 1e-4, 15, False),
        "medium": ("TF32", 1.5, 3.0, 2e-3, 15, False),
    }
    with pytest.raises(ValueError, match="unknown precision 'loose'"):
        bound_factor("loose", 10)


def test_fp32_meets_every_tier_and_a_tensor_core_tier_only_its_own():
    assert meets("highest", "medium") and meets("high", "high") and meets("medium", "medium")
    assert not meets("high", "medium") and not meets("medium", "high") and not meets("medium", "highest")
    # The static cost model is an FFMA model: the tensor-core tiers' families declare no `cost`.
    some = [object()]
    assert not applies(Family.load("mma_tf32"), some) and not applies(Family.load("wgmma_tf32"), some)
    assert applies(Family.load("warptile"), some)


def test_a_tier_is_refused_a_name_a_record_name_would_misread_or_one_taken():
    for name in ("nt", "b64", "beta3", "High", "a_b", ""):
        with pytest.raises(ValueError, match="tier name"):
            Tier(name, "FP32", None, None, 1e-4, LOOSE.bound, 1, "x", "x")
    with pytest.raises(ValueError, match="bar"):
        Tier("fp16", "FP16", 1.5, None, 1e-4, LOOSE.bound, 1, "x", "x")
    with pytest.raises(ValueError, match="registered already"):
        register(TIERS["high"])
    with pytest.raises(ValueError, match="default"):
        unregister("highest")


def test_a_tier_not_registered_is_refused_everywhere():
    with pytest.raises(UserError, match="precision must be one of highest, high, medium"):
        Problem(64, 64, 64, precision="loose")
    with pytest.raises(UserError, match="_highest, _high or _medium after it"):
        Problem.parse("512_loose")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--size", "64", "--precision", "loose"])
    with pytest.raises(UserError, match="precision 'loose'"):
        Case("general", 8, 8, 8, precision="loose")


def test_a_registered_tier_is_a_problem_s_a_record_s_and_a_shape_s(loose):
    p = Problem(64, 96, 128, "nt", precision="loose")
    assert p.name == "64x96x128_nt_loose" and p.as_dict()["precision"] == "loose"
    assert Problem.parse(p.name) == p and Problem(**p.as_dict()) == p
    assert p.pinned["PRECISION"] == "loose"
    with pytest.raises(UserError, match="_highest, _high, _medium or _loose after it"):
        Problem.parse("512_lose")


def test_a_registered_tier_is_on_the_command_line(loose, capsys):
    args = build_parser().parse_args(["search", "--size", "64", "--precision", "loose"])
    assert args.precision == "loose"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{highest,high,medium,loose}" in text
    assert "loose: a looser tier than medium, for a test." in text
    assert "the record's name ends in _high, _medium or _loose" in text


def test_the_fuzzer_draws_a_registered_tier_at_its_share_and_bounds_it_by_its_own(loose):
    rng = random.Random(5)
    drawn = [draw(rng).precision for _ in range(4000)]
    # shares 70, 15, 15 and 100: half the cases are loose, about a third highest
    assert 0.46 < drawn.count("loose") / len(drawn) < 0.54
    assert 0.31 < drawn.count("highest") / len(drawn) < 0.39
    assert Case("general", 8, 8, 8, precision="loose").problem.precision == "loose"
    for K in (1, 100, 5000):
        assert bound_factor("loose", K) == 2.0**-7 + 3 * K * U
    assert tier("loose").tolerance == 5e-3


def test_a_registered_tier_is_served_by_fp32_families_not_other_tiers_and_exported_by_name(loose, tmp_path, h100):
    p = Problem(1000, 1000, 1000, precision="loose")
    assert Family.load("vectorized").gaps(p) == []
    assert Family.load("mma_tf32").gaps(p) and not meets("medium", "loose") and meets("highest", "loose")
    params = dict(BM=128, BN=128, BK=16, TM=8, TN=8)
    update_record(tmp_path, GPU, p, {"vectorized": _entry("vectorized", params, 30000.0, h100, p)})
    out, _ = export(tmp_path, GPU["slug"], p, tmp_path / "tuned.h")
    text = out.read_text()
    assert "loose TF32 tensor-core (a test's tier)" in text and "1000x1000x1000_loose" in text
