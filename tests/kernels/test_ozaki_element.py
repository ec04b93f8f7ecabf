"""The Ozaki route's elementwise guarantee (kernels/ozaki_element.py): where it holds, every element
of the route's C is within the tier's bound (the fuzzer's criterion), whatever the inputs; its
lower bound on |A||B| is one; it rejects the wide-range inputs the sampled check let through and
costs dense inputs no modulus."""

import itertools

import numpy as np
import pytest

from autotune.core.tiers import tier
from autotune.kernels import ozaki
from autotune.kernels.ozaki_choice import KINDS, operands
from autotune.kernels.ozaki_element import QBITS, RUN, holds, magnitude_floor, magnitudes, stride, subset, worst_error
from autotune.kernels.ozaki_guard import admit, route_product


def _within_bound(a, b, n) -> float:
    """Return the route's largest |C - C64| over the fuzzer's bound (1 or less: right)."""
    c = route_product(a, b, n).astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, s = a64 @ b64, np.abs(a64) @ np.abs(b64)
    return float((np.abs(c - ref) / (tier("high").bound(a.shape[1]) * s + 1e-30)).max())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("m", "k", "n"), [(1, 16, 6), (40, 4, 30), (120, 64, 90), (64, 700, 48), (9, 1, 7), (12, 4500, 10)]
)
def test_where_it_holds_every_element_is_within_the_bound(kind, m, k, n):
    rng = np.random.default_rng(m * k + n)
    for _ in range(2):
        a, b = operands(kind, m, k, n, rng)
        for count in (4, 5, 6, 7, 8, 10):
            if holds(a, b, count):
                assert _within_bound(a, b, count) <= 1.0, (kind, count)


def test_an_adversarial_element_fails_the_guarantee_where_the_route_would_miss():
    """Row 0 of A is large at k = 0 and tiny elsewhere; column 0 of B tiny at k = 0 and large
    elsewhere: the tiny a's are lost in the scaling and their products are most of C_00."""
    rng = np.random.default_rng(3)
    a, b = operands("uniform", 8, 32, 8, rng)
    a[0], b[:, 0] = 2.0**-30, 1.0
    a[0, 0], b[0, 0] = 1.0, 2.0**-30
    for count in range(4, 9):
        assert not holds(a, b, count) and _within_bound(a, b, count) > 1.0


def test_the_magnitude_floor_is_a_lower_bound_and_tight_for_dense_inputs():
    rng = np.random.default_rng(4)
    for kind in KINDS:
        a, b = operands(kind, 50, 300, 40, rng)
        s = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        low = magnitude_floor(a, b)
        assert (low <= s).all(), kind
        if kind in ("uniform", "normal", "rowscaled"):
            assert (low >= s * (1 - 2.0**-3)).all(), kind
    q, s_ = magnitudes(np.array([[0.0, 0.0], [3.0, -1.5]]), 1)  # 3 < 2^2: scaled by 2^(7 - 2)
    np.testing.assert_array_equal(q, [[0, 0], [96, 48]])
    assert s_[1] == 5 and q.max() < 2**QBITS


def test_the_strided_floor_sums_every_stride_th_run_of_k_alone():
    assert [stride(k) for k in (1, 1023, 1024, 2047, 2048, 5000, 8192, 10**6)] == [1, 1, 1, 1, 2, 4, 8, 8]
    k = 2 * RUN * 3 + 5  # three whole pairs of runs and a part of a fourth run
    np.testing.assert_array_equal(subset(k, 1), np.arange(k))
    np.testing.assert_array_equal(subset(k, 2), np.r_[0:32, 64:96, 128:160, 192:197])
    np.testing.assert_array_equal(subset(k, 8), np.arange(RUN))
    rng = np.random.default_rng(8)
    a, b = operands("normal", 20, k, 15, rng)
    whole = magnitude_floor(a, b)
    (qa, sa), (qb, sb) = magnitudes(a, 1), magnitudes(b, 0)
    for r in (2, 3, 8):
        ks = subset(k, r)
        low = magnitude_floor(a, b, r)
        np.testing.assert_array_equal(low, np.ldexp((qa[:, ks] @ qb[ks]).astype(np.float64), -(sa[:, None] + sb)))
        assert (low <= whole).all() and (low < whole).any(), r


def test_the_worst_error_bounds_the_scaling_error_at_every_element():
    rng = np.random.default_rng(5)
    for kind in KINDS:
        a, b = operands(kind, 30, 200, 20, rng)
        for count in (5, 7):
            sc = ozaki.scale(a, b, count)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            da, db = np.ldexp(sc.a, -sc.e[:, None]) - a64, np.ldexp(sc.b, -sc.f[None, :]) - b64
            err = np.abs(da @ b64 + a64 @ db + da @ db)
            assert (err <= worst_error(a, b, sc.e, sc.f) * (1 + 1e-12)).all(), (kind, count)


def test_it_rejects_wide_inputs_at_small_k_and_costs_dense_inputs_no_modulus():
    rng = np.random.default_rng(6)
    wide = operands("wide", 300, 64, 300, rng)
    assert not any(holds(*wide, count) for count in range(1, 13))
    for kind, k in itertools.product(("uniform", "normal", "cancelling", "rowscaled"), (2048, 8192)):
        a, b = operands(kind, 100, k, 60, rng)  # the floor at stride 2 and 8
        contract = admit(a, b, max_moduli=12, advantage=1.0).moduli
        assert contract is not None and holds(a, b, contract), (kind, k)


@pytest.mark.parametrize("k", [2048, 8192])
def test_the_strided_floor_costs_activations_and_sparse_inputs_no_modulus(k):
    """A ReLU's output (half zeros) and a 90%-sparse operand hold at 7 moduli with K's subset, as
    with all of K: the subset's floor shrinks with the products it leaves out, zeros or not."""
    rng = np.random.default_rng(k)
    b = rng.standard_normal((k, 48)).astype(np.float32)
    relu = np.maximum(rng.standard_normal((64, k)), 0).astype(np.float32)
    sparse = (rng.standard_normal((64, k)) * (rng.random((64, k)) > 0.9)).astype(np.float32)
    for a in (relu, sparse):
        assert holds(a, b, 7) and holds(a, b, 7, 1)
