"""The Ozaki scaling and reconstruction kernels on the device, each against kernels/ozaki.py exactly:
exponents and every modulus's residues at several shapes, layouts, pitches and input kinds; C from
the same integer products, and the one rounding of a CRT integer to double at its ties."""

import numpy as np
import pytest

from autotune.kernels import ozaki
from autotune.kernels.ozaki_choice import operands

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1, 1), (37, 100, 45), (130, 1000, 70), (33, 4099, 20)]  # M, K, N


@pytest.fixture(scope="module")
def engines():
    from autotune.gpu.ozaki import OzakiGemm

    return {n: OzakiGemm(n, kernel="fast") for n in (4, 8, 20)}


def _stored(x, pad):
    """Return float32 `x` on the device in rows `pad` floats longer (NaN past them)."""
    import cupy as cp

    big = cp.full((x.shape[0], x.shape[1] + pad), np.nan, cp.float32)
    big[:, : x.shape[1]] = cp.asarray(np.ascontiguousarray(x))
    return big[:, : x.shape[1]]


def _check_residues(got, want_int, want_e, n, k):
    """The device's exponents and planes equal NumPy's; the padding past K is zeros."""
    import cupy as cp

    assert np.array_equal(cp.asnumpy(got.e), want_e)
    r = cp.asnumpy(got.r)
    assert r.shape[2] % 16 == 0 and not r[:, :, k:].any()
    for q, m in enumerate(ozaki.moduli(n)):
        assert np.array_equal(r[q, :, :k], ozaki.residues(want_int, m)), f"modulus {m}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["uniform", "wide", "denormal", "rowscaled"])
@pytest.mark.parametrize("n", [4, 8, 20])
def test_scaling_writes_ozakis_residues(engines, shape, kind, n):
    m, k, nn = shape
    a, b = operands(kind, m, k, nn, np.random.default_rng(m + k + n))
    a[0, :] = 0  # a zero row keeps exponent 0 and zero residues
    if 2.0 ** ozaki.norm_bits(n) <= k**0.5 / 2:
        pytest.skip("too few moduli for this K")
    want = ozaki.scale(a, b, n)
    for transposed, pad in ((False, 0), (True, 0), (False, 5), (True, 3)):
        # op(A)'s rows: the stored rows of M x K A, the stored columns of K x M A. op(B)'s
        # columns: the stored columns of K x N B, the stored rows of N x K B.
        ra = engines[n].scale(_stored(a.T if transposed else a, pad), 1 if transposed else 0)
        _check_residues(ra, want.a, want.e, n, k)
        rb = engines[n].scale(_stored(b.T if transposed else b, pad), 0 if transposed else 1)
        _check_residues(rb, want.b.T, want.f, n, k)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel", ["fast", "reference", "wgmma", "wgmma_tma"])
def test_products_of_the_scaled_planes_equal_ozakis(engines, shape, kernel):
    """The INT8 GEMMs on the planes the scaling wrote (stacked, pitch padded): NumPy's int8_gemm
    each, in uint8 planes n x M x N."""
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm

    m, k, nn = shape
    n = 8
    if kernel.startswith("wgmma") and cp.cuda.Device().compute_capability != "90":
        pytest.skip("the wgmma kernels run on sm_90a")
    a, b = operands("wide", m, k, nn, np.random.default_rng(m + k))
    engine = engines[n] if kernel == "fast" else OzakiGemm(n, kernel=kernel)
    ra, rb = engine.scale(_stored(a, 0), 0), engine.scale(_stored(b, 3), 1)
    p = engine.products(ra, rb)
    assert p.dtype == cp.uint8 and p.shape == (n, m, nn) and p.flags.c_contiguous
    got = cp.asnumpy(p)
    s = ozaki.scale(a, b, n)
    for q, mod in enumerate(ozaki.moduli(n)):
        want = ozaki.int8_gemm(ozaki.residues(s.a, mod), ozaki.residues(s.b, mod), mod)
        assert np.array_equal(got[q], want), f"modulus {mod}"


def _reconstruct(engine, parts, e, f, alpha, beta, c):
    import cupy as cp

    assert all(0 <= x.min() and x.max() < 256 for x in parts)  # residues below m <= 256: bytes
    p = cp.asarray(np.stack(parts).astype(np.uint8))
    out = cp.asarray(c)
    engine.reconstruct(p, cp.asarray(e, cp.int32), cp.asarray(f, cp.int32), out, alpha, beta)
    return cp.asnumpy(out)


@pytest.mark.parametrize("n", [4, 8, 20])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (-0.75, 0.0), (1.5, -2.0)])
def test_reconstruction_from_the_same_products_equals_ozakis(engines, n, alpha, beta):
    m, k, nn = 50, 300, 40
    rng = np.random.default_rng(n)
    a, b = operands("wide", m, k, nn, rng)
    c = rng.standard_normal((m, nn)).astype(np.float32)
    s = ozaki.scale(a, b, n)
    parts = [ozaki.int8_gemm(ozaki.residues(s.a, q), ozaki.residues(s.b, q), q) for q in ozaki.moduli(n)]
    got = _reconstruct(engines[n], parts, s.e, s.f, alpha, beta, c)
    want = ozaki.gemm(a, b, n, alpha, beta, c)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_reconstruction_takes_only_uint8_planes(engines):
    """int32 planes (the INT8 kernels' raw mode, or the old products) are refused, not misread."""
    import cupy as cp

    e, f, c = cp.zeros(3, cp.int32), cp.zeros(5, cp.int32), cp.zeros((3, 5), cp.float32)
    with pytest.raises(ValueError, match="uint8 planes"):
        engines[4].reconstruct(cp.zeros((4, 3, 5), cp.int32), e, f, c)
    with pytest.raises(ValueError, match="uint8 planes"):
        engines[4].reconstruct(cp.zeros((4, 3, 10), cp.uint8)[:, :, ::2], e, f, c)
    assert engines[4].reconstruct(cp.zeros((4, 3, 5), cp.uint8), e, f, c) is c


@pytest.mark.parametrize("n", [8, 20])
def test_a_crt_integer_is_rounded_once_to_double_ties_to_even(engines, n):
    """beta C cancels the top of x: what is left shows the double's last bits (256 an ulp at 2^60)."""
    top = 60 if n == 8 else 150
    half_ulp = 2 ** (top - 53)
    deltas = [0, 1, half_ulp - 1, half_ulp, half_ulp + 1, 3 * half_ulp, 3 * half_ulp + 1, 5 * half_ulp]
    xs = [s * (2**top + d) for d in deltas for s in (1, -1)] + [0, 1, -1, 12345]
    shift = top - 60  # unscaled by 2^-shift so that 2^top lands on 2^60, inside float32
    c = np.array([[-np.sign(x) * 2.0**60 if abs(x) > 2**59 else 0.0 for x in xs]], np.float32)
    parts = [np.array([[x % q for x in xs]], np.int64) for q in ozaki.moduli(n)]
    got = _reconstruct(engines[n], parts, [shift], np.zeros(len(xs)), 1.0, 1.0, c)
    want = np.array([[np.ldexp(float(x), -shift) for x in xs]]) + c.astype(np.float64)
    assert np.array_equal(got, want.astype(np.float32))
    # Ties at 2^60 + 2^7 (to 2^60) and 2^60 + 3 2^7 (to 2^60 + 2^9); just past one, up.
    assert list(got[0, 6:12]) == [0.0, 0.0, 256.0, -256.0, 512.0, -512.0]
