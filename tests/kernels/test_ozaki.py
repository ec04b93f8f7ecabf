"""Ozaki scheme II in NumPy (kernels/ozaki.py, ozaki_choice.py): exact arithmetic, the INT32 bound
at any K, errors against the float64 product beside FP32 SGEMM's, and the scaling's error bound."""

import math

import numpy as np
import pytest

from autotune.kernels import ozaki
from autotune.kernels.ozaki_choice import KINDS, bound, errors, operands
from autotune.kernels.ozaki_guard import admit

SHAPE = (48, 96, 40)  # M, K, N: small for two shared cores, K even for the cancelling kind


def _draw(kind, seed=0, shape=SHAPE):
    m, k, n = shape
    return operands(kind, m, k, n, np.random.default_rng(seed))


def test_moduli_are_pairwise_coprime_and_their_residues_fit_int8():
    ms = ozaki.MODULI
    assert all(math.gcd(x, y) == 1 for i, x in enumerate(ms) for y in ms[i + 1 :])
    x = np.arange(-3000, 3000, dtype=np.float64)
    for m in ms:
        r = ozaki.residues(x, m)
        assert r.dtype == np.int8 and r.min() == -(m // 2) and r.max() == m - 1 - m // 2
        assert np.all(np.mod(r.astype(np.int64) - x.astype(np.int64), m) == 0)
    # Huge integers (a scaled float32 times 2^60) reduce exactly too.
    big = np.float64(2.0**60 * 12345)
    assert int(ozaki.residues(np.array([big]), 251)[0]) % 251 == (2**60 * 12345) % 251


def test_scaling_keeps_each_row_and_column_inside_the_crt_range():
    a, b = _draw("wide")
    for n in (4, 6, 8, 12):
        s = ozaki.scale(a, b, n)
        assert np.all(s.a == np.rint(s.a)) and np.all(s.b == np.rint(s.b))
        top = 2.0 ** ozaki.norm_bits(n)
        na, nb = np.linalg.norm(s.a, axis=1), np.linalg.norm(s.b, axis=0)
        assert na.max() <= top and nb.max() <= top
        # Not wastefully: one more power of two would overflow the norm bound for every row.
        assert np.all(2 * na > top - math.sqrt(a.shape[1]))
        # Cauchy-Schwarz then makes the symmetric reconstruction unique.
        assert na.max() * nb.max() < math.prod(ozaki.moduli(n)) / 2


def test_the_crt_rebuilds_the_integer_product_exactly():
    a, b = _draw("normal")
    for n in (5, 8, 11):
        s = ozaki.scale(a, b, n)
        parts = [ozaki.int8_gemm(ozaki.residues(s.a, m), ozaki.residues(s.b, m), m) for m in ozaki.moduli(n)]
        assert np.array_equal(ozaki.crt(parts, n), ozaki.exact_int_product(s.a, s.b))


def test_small_integers_are_multiplied_exactly_with_alpha_and_beta():
    a, b = _draw("smallint")
    c = np.random.default_rng(1).integers(-8, 9, (a.shape[0], b.shape[1])).astype(np.float32)
    want = 2.0 * (a.astype(np.int64) @ b.astype(np.int64)) - 3.0 * c
    assert np.array_equal(ozaki.gemm(a, b, 6, alpha=2.0, beta=-3.0, c=c), want.astype(np.float32))


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "coupled"])
def test_eight_moduli_are_at_least_as_accurate_as_fp32_sgemm(kind):
    """On every input kind but the coupled spread, 8 moduli's max and median errors against the
    float64 product are no worse than NumPy's FP32 SGEMM's (with a floor of C's last rounding)."""
    a, b = _draw(kind, seed=3)
    fp32 = errors(a @ b, a, b)
    got = errors(ozaki.gemm(a, b, 8), a, b)
    floor = 2.0**-24
    assert got[0] <= max(fp32[0], floor) and got[1] <= max(fp32[1], floor), (got, fp32)


def test_errors_fall_as_moduli_are_added_until_c_rounding_is_all_that_is_left():
    a, b = _draw("uniform", seed=5)
    errs = [errors(ozaki.gemm(a, b, n), a, b)[1] for n in range(4, 10)]
    # Each modulus adds about 4 bits to each operand (8 to the product's range): 2^-4 or better,
    # until the median meets C's own rounding.
    for before, after in zip(errs, errs[1:], strict=False):
        assert after <= max(before / 8, 2.0**-26), errs
    assert errs[0] > 1e-6 and errs[-1] < 2e-9


def test_with_beta_c_is_added_in_float64_and_rounded_once():
    a, b = _draw("normal", seed=7)
    c = np.random.default_rng(8).standard_normal((a.shape[0], b.shape[1])).astype(np.float32)
    got = ozaki.gemm(a, b, 9, alpha=0.5, beta=2.0, c=c)
    want = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2.0 * c
    assert np.max(np.abs(got - want) / np.abs(want)) < 2.0**-23


def test_int32_accumulation_never_overflows_at_k_past_two_to_the_seventeen():
    """K = 2^17 + 3 products of (-128)(-128) (256's deepest residues): 2^31 and more in one INT32
    sum, so the product is formed in chunks of K_CHUNK, each reduced before the next."""
    assert ozaki.K_CHUNK * ozaki.RESIDUE_MAX**2 <= ozaki.INT32_MAX < 2 * ozaki.K_CHUNK * ozaki.RESIDUE_MAX**2
    k = 2**17 + 3
    ra = np.full((2, k), -128, np.int8)
    rb = np.full((k, 3), -128, np.int8)
    rb[::7, 1] = 127
    got = ozaki.int8_gemm(ra, rb, 256)
    want = np.mod(ra.astype(object) @ rb.astype(object), 256).astype(np.int64)
    assert np.array_equal(got, want)
    assert k * 128 * 128 > ozaki.INT32_MAX  # one unchunked INT32 sum would have overflowed
    with pytest.raises(AssertionError, match="overflows"):
        ozaki.int8_gemm(ra, rb, 256, k_chunk=2**17)
    # And the whole emulation at that K, on few rows: exact for integers.
    rng = np.random.default_rng(2)
    a, b = rng.integers(-3, 4, (2, k)).astype(np.float32), rng.integers(-3, 4, (k, 2)).astype(np.float32)
    assert np.array_equal(ozaki.gemm(a, b, 5), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


def test_the_bound_holds():
    for kind in ("uniform", "wide", "rowscaled"):
        a, b = _draw(kind, seed=11)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        ref, s = a64 @ b64, np.abs(a64) @ np.abs(b64)
        for n in (5, 7):
            sc = ozaki.scale(a, b, n)
            prod = np.ldexp(ozaki.exact_int_product(sc.a, sc.b).astype(np.float64), -(sc.e[:, None] + sc.f[None, :]))
            # The exact product of the scaled integers misses by no more than the bound (before C's rounding).
            assert np.max(np.abs(prod - ref) / s) <= bound(a, b, n).elementwise * (1 + 1e-9)


def test_a_zero_row_or_matrix_is_served():
    a, b = _draw("normal")
    a[3] = 0
    out = ozaki.gemm(a, b, 7)
    assert np.all(out[3] == 0)
    z = np.zeros_like(a)
    assert np.all(ozaki.gemm(z, b, 3) == 0) and admit(z, b).moduli == 1
