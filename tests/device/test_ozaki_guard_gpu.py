"""The Ozaki route's per-call check on device arrays (gpu/ozaki_guard.py): the verdict NumPy gives
for the same operands (subnormals included: its kernels do not flush them, as CuPy's do), whatever
their layout and row pitch on the device, with the sums of NumPy's form to rounding."""

import numpy as np
import pytest
from helpers import padded_on_device

from autotune.kernels.ozaki_choice import KINDS, operands
from autotune.kernels.ozaki_guard import GUARD_COUNTS, admit, sample_stats

pytestmark = pytest.mark.gpu


def device_admit(a, b, **kw):
    """gpu/ozaki_guard.py's admit (CuPy is imported only where a test runs)."""
    from autotune.gpu.ozaki_guard import admit as on_device

    return on_device(a, b, **kw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("ta", "tb", "pad"), [(False, False, 0), (True, False, 3), (False, True, 5)])
def test_the_device_verdict_is_numpy_s(kind, ta, tb, pad):
    a, b = operands(kind, 72, 600, 56, np.random.default_rng(11))
    want = admit(a, b, max_moduli=12, seed=2)
    got = device_admit(padded_on_device(a, ta, pad), padded_on_device(b, tb, pad), max_moduli=12, seed=2)
    assert got.method == want.method and got.moduli == want.moduli
    assert got.normwise == pytest.approx(want.normwise, rel=1e-9)
    assert got.median == pytest.approx(want.median, rel=1e-9)


@pytest.mark.parametrize("k", [1, 7, 255, 256, 257, 3000])
def test_the_device_sums_are_numpy_s(k):
    """Every sum, at depths under, at and past a run a thread, and more counts than a launch takes."""
    import cupy as cp

    from autotune.gpu.ozaki_guard import DeviceGuard

    rng = np.random.default_rng(k)
    a, b = operands("wide", 40, k, 30, rng)
    rows, cols = rng.integers(0, 40, 50), rng.integers(0, 30, 50)
    q = GUARD_COUNTS + 3
    e, f = rng.integers(-5, 30, (q, 50)), rng.integers(-5, 30, (q, 50))
    want = sample_stats(a, b)(rows, cols, e, f)
    got = DeviceGuard().stats(padded_on_device(a, True, 1), cp.asarray(b))(rows, cols, e, f)
    assert got.shape == want.shape == (3 + 3 * q, 50)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_an_infinity_on_the_device_goes_to_3xtf32():
    import cupy as cp

    a, b = operands("uniform", 32, 64, 32, np.random.default_rng(2))
    a[3, 9] = np.inf
    assert device_admit(cp.asarray(a), cp.asarray(b)).moduli is None
    a[3, 9] = np.nan
    assert device_admit(cp.asarray(a), cp.asarray(b)).moduli is None


@pytest.mark.parametrize(("m", "k", "n"), [(3, 1, 5), (1, 40, 1), (9, 2, 300), (200, 17, 7), (8, 5000, 8)])
def test_the_device_verdict_at_odd_shapes(m, k, n):
    """Fewer rows or columns than the top pairs take (they repeat), K of 1 and past a launch's runs."""
    for kind in ("uniform", "wide", "coupled"):
        a, b = operands(kind, m, k, n, np.random.default_rng(m + k + n))
        want = admit(a, b, max_moduli=20, seed=1)
        got = device_admit(padded_on_device(a, False, 0), padded_on_device(b, True, 2), max_moduli=20, seed=1)
        assert (got.method, got.moduli) == (want.method, want.moduli), (kind, got, want)
        assert got.normwise == pytest.approx(want.normwise, rel=1e-9)
        assert got.median == pytest.approx(want.median, rel=1e-9)


def test_the_norms_the_scaling_pass_writes_give_the_same_verdict():
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm
    from autotune.gpu.ozaki_guard import DeviceGuard

    a, b = (cp.asarray(x) for x in operands("rowscaled", 300, 700, 200, np.random.default_rng(3)))
    eng, guard = OzakiGemm(7), DeviceGuard()
    na, nb = cp.empty(300, cp.float64), cp.empty(200, cp.float64)
    eng.exponents(a, 0, norms=na)
    eng.exponents(b, 1, norms=nb)
    np.testing.assert_allclose(na.get(), np.linalg.norm(a.get().astype(np.float64), axis=1), rtol=1e-14)
    np.testing.assert_array_equal(nb.get(), guard.norms(b, 1).get())
    assert guard.admit(a, b, norms=(na, nb)) == guard.admit(a, b)


def test_empty_and_zero_operands():
    import cupy as cp

    z = cp.zeros((16, 64), cp.float32)
    assert device_admit(z, cp.ones((64, 8), cp.float32)).moduli == admit(z.get(), np.ones((64, 8), np.float32)).moduli
    assert device_admit(cp.zeros((0, 64), cp.float32), cp.ones((64, 8), cp.float32)).method == "ozaki-int8"


def test_norms_of_the_wrong_length_are_refused_not_read_past():
    import cupy as cp

    from autotune.gpu.ozaki_guard import DeviceGuard

    a, b = cp.ones((16, 64), cp.float32), cp.ones((64, 8), cp.float32)
    g = DeviceGuard()
    with pytest.raises(ValueError, match="norms"):
        g.admit(a, b, norms=(g.norms(a, 0)[:15], g.norms(b, 1)))
    host = (np.full(16, 8.0), np.full(8, 8.0))  # host norms are copied over
    assert g.admit(a, b, norms=host) == g.admit(a, b)


@pytest.mark.parametrize(("m", "k", "n"), [(96, 700, 80), (64, 8192, 48), (300, 40, 5)])
def test_the_device_advantage_is_numpy_s_of_the_same_c(m, k, n):
    """The search's measure of cuBLAS at a shape: the device's sums and C read at the sample."""
    import cupy as cp

    from autotune.gpu.ozaki_guard import DeviceGuard
    from autotune.kernels.ozaki_guard import measured_advantage

    a, b = operands("normal", m, k, n, np.random.default_rng(k))
    da, db = cp.asarray(a), cp.asarray(b)
    c = cp.matmul(da, db)
    got = DeviceGuard().advantage(da, db, c, seed=3)
    assert got >= 1.0
    assert got == pytest.approx(measured_advantage(a, b, c.get(), seed=3), rel=1e-6)


@pytest.mark.parametrize("m", [1, 3, 40])
def test_nan_norms_go_to_3xtf32_and_are_never_read_past(m):
    """A NaN norm (an infinity's compensated sum of squares) is no smaller than any: the pick
    kernel once left no index for it and read 2^31 doubles past the norms (fuzz --route, seed 21)."""
    import cupy as cp

    from autotune.gpu.ozaki_guard import DeviceGuard

    a, b = (cp.asarray(x) for x in operands("smallint", m, 1, 96, np.random.default_rng(m)))
    a[0, 0] = np.inf
    guard = DeviceGuard()
    na, nb = guard.norms(a, 0), guard.norms(b, 1)
    for norms in ((na, nb), (cp.full(m, np.nan), nb), (na, cp.full(96, np.nan))):
        v = guard.admit(a, b, norms=norms)
        assert v.moduli is None and v.method != "ozaki-int8"
    cp.cuda.Device().synchronize()  # a read past the norms would fault here
