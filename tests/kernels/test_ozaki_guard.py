"""The per-call check of the Ozaki route (kernels/ozaki_guard.py): at the count it admits, the
route's errors (max and median, the contract's measures) stay within the `high` contract's 1.5x
of an FP32 SGEMM's on every input kind; it asks for more moduli where the inputs need them, sends
what no count up to the cap can carry to 3xTF32, and is the same verdict for the same inputs."""

import numpy as np
import pytest

from autotune.core.tiers import TIERS
from autotune.kernels import ozaki
from autotune.kernels.ozaki_choice import KINDS, OTHER, errors, operands
from autotune.kernels.ozaki_guard import (
    RATIO,
    SAMPLES,
    TOP,
    _exponent_table,
    _largest,
    _Sample,
    admit,
    measured_advantage,
    route_product,
    sample_stats,
    sgemm_chain,
)

CAP = 12  # past ozaki_choice.MAX_MODULI, to see the count the inputs ask for


def test_the_references_are_what_ozaki_gemm_and_a_chain_compute():
    a, b = operands("wide", 24, 40, 16, np.random.default_rng(3))
    for n in (5, 7):  # an element may round the other way: its float64 sum is within 2^-53 of the exact one
        np.testing.assert_array_max_ulp(route_product(a, b, n), ozaki.gemm(a, b, n), maxulp=1)
    # The chain: the FP32 sum of the first two products, rounded after each, then the third.
    x, y = np.float32([[1.0, 2.0**-24, 2.0**-24]]), np.float32([[1.0], [1.0], [1.0]])
    assert sgemm_chain(x, y)[0, 0] == np.float32(1.0)  # each half-ulp lost to round-to-even
    assert (x.astype(np.float64) @ y)[0, 0] > 1.0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(96, 512, 80), (64, 40, 128)])
def test_at_the_count_it_admits_the_route_keeps_the_high_contract(kind, shape):
    a, b = operands(kind, *shape, np.random.default_rng(sum(shape)))
    v = admit(a, b, max_moduli=CAP)
    if kind == "coupled":  # a row of A spread over 20 binades that B's column undoes
        assert v.moduli is None or v.moduli >= 10, v
    if v.moduli is None:
        return
    assert v.method == "ozaki-int8" and v.normwise <= RATIO and v.median <= RATIO
    fp32, route = errors(sgemm_chain(a, b), a, b), errors(route_product(a, b, v.moduli), a, b)
    limit = TIERS["high"].contract
    assert route[0] <= limit * fp32[0] and route[1] <= limit * fp32[1], (v, route, fp32)


def test_a_more_accurate_sgemm_asks_for_more_moduli_never_fewer():
    """Run 264 (H200, 4096^3, cuBLAS summing as one chain): 7 moduli the fewest whose errors stay
    under SGEMM's on uniform, normal, cancelling and row-scaled inputs; 6 were above. Against such
    a chain the check must not ask for 8 there; the default (cuBLAS splitting K) may, never fewer."""
    rng = np.random.default_rng(0)
    for kind in ("uniform", "normal", "cancelling", "rowscaled"):
        a, b = operands(kind, 64, 2048, 48, rng)
        chain = admit(a, b, advantage=1.0)
        assert chain.moduli == 7, kind
        assert admit(a, b).moduli >= chain.moduli and (admit(a, b, advantage=10).moduli or 99) >= admit(a, b).moduli


def test_more_moduli_where_a_row_spreads_and_3xtf32_past_the_cap():
    rng = np.random.default_rng(1)
    a, b = operands("coupled", 64, 512, 64, rng)
    assert admit(a, b).method == OTHER  # the cap: ozaki_choice.MAX_MODULI (8)
    assert admit(a, b, max_moduli=CAP, advantage=1.0).moduli >= 10
    assert admit(a, b, max_moduli=CAP).moduli >= admit(a, b, max_moduli=CAP, advantage=1.0).moduli
    # Tiny K of wide exponents: SGEMM loses little, so the route must keep almost every bit.
    a, b = operands("wide", 256, 16, 64, rng)
    assert (admit(a, b, max_moduli=CAP).moduli or CAP + 1) > admit(*operands("uniform", 256, 16, 64, rng)).moduli


def _adversarial(name, rng):
    """Inputs no KINDS draw is: one row spread over 40 binades, a sparse A, a few outliers, a
    rank-1 A against zero-mean columns (C far below |A||B|), tiny columns, rows and columns 2^+-60."""
    a, b = rng.random((96, 512)) * 2 - 1, rng.random((512, 80)) * 2 - 1
    if name == "spread row":
        a[5] *= np.exp2(rng.random(512) * 40 - 20)
    elif name == "sparse":
        a *= rng.random(a.shape) < 0.1
    elif name == "outliers":
        a.flat[rng.integers(0, a.size, 5)] *= 1e6
    elif name == "rank one":
        a, b = a[:, :1] + 1e-6 * a, b - b.mean(axis=0)
    elif name == "tiny columns":
        a[:, ::2] *= 2.0**-30
    else:
        a, b = a * np.exp2(rng.integers(-60, 60, (96, 1))), b * np.exp2(rng.integers(-60, 60, (1, 80)))
    return a.astype(np.float32), b.astype(np.float32)


@pytest.mark.parametrize("name", ["spread row", "sparse", "outliers", "rank one", "tiny columns", "scaled"])
def test_inputs_no_kind_draws_keep_the_contract_too(name):
    a, b = _adversarial(name, np.random.default_rng(0))
    v = admit(a, b, max_moduli=CAP)
    assert v.moduli is not None, v
    fp32, route = errors(sgemm_chain(a, b), a, b), errors(route_product(a, b, v.moduli), a, b)
    assert route[0] <= fp32[0] and route[1] <= fp32[1], (v, route, fp32)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_an_input_that_is_not_finite_goes_to_3xtf32(bad):
    a, b = operands("uniform", 32, 64, 32, np.random.default_rng(2))
    a[5, 7] = bad
    v = admit(a, b)
    assert v.method == OTHER and v.moduli is None and v.normwise is None
    b[3, 1], a[5, 7] = bad, 0.0
    assert admit(a, b).method == OTHER


def test_bisection_finds_the_fewest_count_a_scan_would():
    rng = np.random.default_rng(4)
    for kind in KINDS:
        a, b = operands(kind, 40, 300, 56, rng)
        na, nb = np.linalg.norm(a.astype(np.float64), axis=1), np.linalg.norm(b.astype(np.float64), axis=0)
        counts = [c for c in range(1, CAP + 1) if ozaki.fits(c, 300)]
        sample = _Sample(na, nb, (40, 300, 56), 0, counts, sample_stats(a, b))
        scan = [c for c in counts if sample.judge(c).moduli is not None]
        # Each count passes if every larger one does: the passing counts run to the cap.
        assert scan == list(range(scan[0], CAP + 1)) if scan else True, (kind, scan)
        assert admit(a, b, max_moduli=CAP).moduli == (scan[0] if scan else None), kind


def test_the_same_inputs_give_the_same_verdict_and_norms_from_a_scaling_pass_are_used():
    a, b = operands("rowscaled", 50, 200, 30, np.random.default_rng(5))
    v = admit(a, b, seed=3)
    assert admit(a, b, seed=3) == v and v.moduli is not None
    # Norms as a device pass returns them (float32): the same exponents, the same verdict.
    norms = (np.linalg.norm(a, axis=1).astype(np.float32), np.linalg.norm(b, axis=0).astype(np.float32))
    assert admit(a, b, seed=3, norms=norms).moduli == v.moduli
    # A zero row and column are exact at any count: the same verdict.
    za, zb = a.copy(), b.copy()
    za[7], zb[:, 4] = 0, 0
    assert admit(za, zb, seed=3).moduli == v.moduli
    # Views: op(A) as the transpose of a stored K x M array (its norms summed in another order).
    t = admit(np.ascontiguousarray(a.T).T, b, seed=3)
    assert t.moduli == v.moduli and t.median == pytest.approx(v.median) and t.normwise == pytest.approx(v.normwise)


def test_the_exponent_table_and_the_largest_are_what_the_slow_forms_give():
    rng = np.random.default_rng(6)
    norms = np.concatenate([np.exp2(rng.random(500) * 80 - 40), [0.0, 0.0, 2.0**20, 2.0**20]])
    counts = [c for c in range(1, CAP + 1) if ozaki.fits(c, 700)]
    table = _exponent_table(norms, counts, 700)
    for q, c in enumerate(counts):
        np.testing.assert_array_equal(table[q], ozaki._exponents(norms, ozaki.norm_bits(c), 700))
    # Ties (the two 2^20 and the zeros) as a stable sort breaks them, at any length.
    for x in (norms, -norms, np.zeros(20), norms[:9], np.round(norms[:300] * 4) / 4):
        np.testing.assert_array_equal(_largest(x), np.argsort(-x, kind="stable")[:TOP])
    # Fewer than TOP: each once, in that order, then again from the first.
    np.testing.assert_array_equal(_largest(np.array([1.0, 3.0, 2.0])), [1, 2, 0, 1, 2, 0, 1, 2])


def test_the_advantage_of_an_sgemm_that_splits_k_is_measured_and_the_check_holds_the_route_to_it():
    rng = np.random.default_rng(8)
    for kind in ("uniform", "normal", "wide"):
        a, b = operands(kind, 64, 3000, 40, rng)
        one, split = sgemm_chain(a, b), sgemm_chain(a, b, splits=32)
        assert measured_advantage(a, b, one) < 1.6, kind  # one chain: its own model, to the noise
        adv = measured_advantage(a, b, split)
        assert adv > 2.5, (kind, adv)  # runs of ~94 instead of 3000: partial sums far smaller
        v = admit(a, b, max_moduli=CAP, advantage=adv)
        fp32, route = errors(split, a, b), errors(route_product(a, b, v.moduli), a, b)
        limit = TIERS["high"].contract
        assert route[0] <= limit * fp32[0] and route[1] <= limit * fp32[1], (kind, adv, v, route, fp32)
    # Exact sums (small integers): no error to measure, nothing asked past one chain.
    a, b = operands("smallint", 16, 64, 8, rng)
    assert measured_advantage(a, b, a.astype(np.float64) @ b) in (1.0, np.inf)
    assert measured_advantage(a[:0], b, np.zeros((0, 8))) == 1.0


def test_the_advantage_reads_c_through_a_function_as_a_device_s_c_is_read():
    a, b = operands("normal", 50, 700, 30, np.random.default_rng(9))
    split, seen = sgemm_chain(a, b, splits=8), []

    def at(rows, cols):
        seen.append(len(rows))
        return split[rows, cols].astype(np.float64)

    norms = (np.linalg.norm(a.astype(np.float64), axis=1), np.linalg.norm(b.astype(np.float64), axis=0))
    assert measured_advantage(a, b, at, seed=4, norms=norms) == measured_advantage(a, b, split, seed=4)
    assert seen == [SAMPLES]  # C read at the random part of the sample alone
