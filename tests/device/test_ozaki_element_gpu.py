"""The Ozaki route's elementwise guarantee on device arrays (gpu/ozaki_element.py): NumPy's
magnitudes, floor and verdict (kernels/ozaki_element.py) for the same operands, whatever their
layout and row pitch, by the raw INT8 GEMM and by float64 alike."""

import numpy as np
import pytest
from helpers import padded_on_device

from autotune.kernels import ozaki
from autotune.kernels.ozaki_choice import KINDS, operands
from autotune.kernels.ozaki_element import holds, magnitude_floor, magnitudes, stride, subset

pytestmark = pytest.mark.gpu

RAWS = ["int8", "float64"]


@pytest.fixture(scope="module")
def elements():
    """One DeviceElement of each raw GEMM (int8 only on Hopper)."""
    import cupy as cp

    from autotune.gpu.ozaki_element import DeviceElement

    hopper = cp.cuda.Device().compute_capability == "90"
    return {raw: DeviceElement(raw) for raw in RAWS if raw != "int8" or hopper}


def _element(elements, raw):
    if raw not in elements:
        pytest.skip("the raw INT8 GEMM needs Hopper")
    return elements[raw]


@pytest.mark.parametrize("raw", RAWS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("ta", "tb", "pad"), [(False, False, 0), (True, False, 3), (False, True, 5), (True, True, 1)])
@pytest.mark.parametrize("k", [300, 2300])  # the floor at stride 1 and 2 (a part run at the end)
def test_the_floor_is_numpy_s(elements, raw, kind, ta, tb, pad, k):
    el = _element(elements, raw)
    a, b = operands(kind, 45, k, 37, np.random.default_rng(5))
    floor = el.floor(padded_on_device(a, ta, pad), padded_on_device(b, tb, pad))
    (qa, sa), (qb, sb) = magnitudes(a, 1), magnitudes(b, 0)
    np.testing.assert_array_equal(floor.sa.get(), sa)
    np.testing.assert_array_equal(floor.sb.get(), sb)
    ks = subset(k, stride(k))
    np.testing.assert_array_equal(floor.raw.get(), qa[:, ks] @ qb[ks])
    got = np.ldexp(floor.raw.get().astype(np.float64), -(floor.sa.get()[:, None] + floor.sb.get()[None, :]))
    np.testing.assert_array_equal(got, magnitude_floor(a, b, stride(k)))
    a64, b64 = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    np.testing.assert_allclose(floor.l1a.get(), a64.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(floor.l1b.get(), b64.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("raw", RAWS)
@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(1, 1, 1), (64, 4096, 48), (130, 17, 260), (7, 2000, 3), (300, 64, 200), (20, 9000, 24), (70000, 40, 3)],
)
def test_the_verdict_is_numpy_s_at_every_count(elements, raw, m, k, n):
    import cupy as cp

    el = _element(elements, raw)
    rng = np.random.default_rng(m + k + n)
    seen = set()
    for kind in KINDS:
        a, b = operands(kind, m, k, n, rng)
        floor = el.floor(cp.asarray(a), cp.asarray(b))
        for count in (4, 5, 6, 7, 8, 10):
            want = holds(a, b, count)
            if ozaki.fits(count, k):
                s = ozaki.scale(a, b, count)
                e, f = cp.asarray(s.e), cp.asarray(s.f)
            else:
                e, f = cp.zeros(m, cp.int32), cp.zeros(n, cp.int32)
            assert el.holds(floor, e, f, count) == want, (kind, count)
            seen.add(want)
    assert seen == {True, False} or (m, k, n) == (1, 1, 1)


def test_an_input_that_is_not_finite_never_holds(elements):
    import cupy as cp

    el = next(iter(elements.values()))
    a, b = operands("uniform", 20, 64, 30, np.random.default_rng(1))
    for bad in (np.nan, np.inf, -np.inf):
        x = a.copy()
        x[3, 7] = bad
        floor = el.floor(cp.asarray(x), cp.asarray(b))
        zeros = cp.zeros(20, cp.int32), cp.zeros(30, cp.int32)
        assert int(el.failures(floor, *zeros, 7)[0]) >= 30  # row 3 of C, at least


def test_k_past_the_raw_sums_exact_range_is_refused(elements):
    import cupy as cp

    from autotune.gpu.ozaki_element import MAX_K

    el = _element(elements, "int8")
    with pytest.raises(ValueError, match="exact to K"):
        el.floor(cp.ones((2, MAX_K + 1), cp.float32), cp.ones((MAX_K + 1, 2), cp.float32), r=1)


@pytest.mark.parametrize(("ta", "pad"), [(False, 0), (True, 3)])
@pytest.mark.parametrize("k", [1, 300, 5000])
def test_the_check_s_norms_pass_makes_the_floor_s_stats(elements, ta, pad, k):
    """The 1-norms and tops come from the check's norms pass (the route's, and the floor's own)."""
    import cupy as cp

    from autotune.gpu.ozaki import Stats
    from autotune.gpu.ozaki_guard import DeviceGuard

    el, guard = next(iter(elements.values())), DeviceGuard()
    a, b = operands("wide", 70, k, 40, np.random.default_rng(k))
    a[5, k // 2], a[6, 0] = np.nan, -np.inf  # a NaN's top is above infinity's; both 1-norms not finite
    mag = np.abs(a)
    x = padded_on_device(a, ta, pad)
    for axis, v in ((0, x), (1, x.T)):  # op(A)'s rows, and the same vectors as op(B)'s columns
        made = Stats.empty(70)
        guard.norms(v, axis, stats=made)
        # As floats: a NaN's bits may differ (the device's is 0x7fffffff), and NaN tops compare equal
        np.testing.assert_array_equal(made.top.get().view(np.float32), mag.max(axis=1))
        np.testing.assert_allclose(made.l1.get(), mag.astype(np.float64).sum(axis=1), rtol=1e-12)
    a[5, k // 2], a[6, 0] = 1.0, 2.0
    x, y = padded_on_device(a, ta, pad), cp.asarray(b)
    sa, sb = Stats.empty(70), Stats.empty(40)
    guard.norms(x, 0, stats=sa), guard.norms(y, 1, stats=sb)
    given, own = el.floor(x, y, stats=(sa, sb)), el.floor(x, y)
    np.testing.assert_array_equal(given.raw.get(), own.raw.get())
    np.testing.assert_array_equal(given.sa.get(), own.sa.get())
    np.testing.assert_allclose(given.l1b.get(), own.l1b.get(), rtol=1e-12)
