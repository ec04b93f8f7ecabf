"""The Ozaki route's per-call check on device arrays (kernels/ozaki_guard.py with CuPy): the verdict
NumPy gives for the same operands, whatever their layout and row pitch on the device."""

import numpy as np
import pytest

from autotune.kernels.ozaki_choice import KINDS, operands
from autotune.kernels.ozaki_guard import admit

pytestmark = pytest.mark.gpu


def _device(x, transposed, pad):
    """Return op(X) stored on the device (transposed: X^T's rows), rows `pad` floats longer."""
    import cupy as cp

    s = np.ascontiguousarray(x.T if transposed else x)
    big = cp.full((s.shape[0], s.shape[1] + pad), np.nan, cp.float32)
    big[:, : s.shape[1]] = cp.asarray(s)
    view = big[:, : s.shape[1]]
    return view.T if transposed else view


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("ta", "tb", "pad"), [(False, False, 0), (True, False, 3), (False, True, 5)])
def test_the_device_verdict_is_numpy_s(kind, ta, tb, pad):
    import cupy as cp

    a, b = operands(kind, 72, 600, 56, np.random.default_rng(11))
    want = admit(a, b, max_moduli=12, seed=2)
    got = admit(_device(a, ta, pad), _device(b, tb, pad), max_moduli=12, seed=2, xp=cp)
    assert got.method == want.method and got.moduli == want.moduli
    assert got.normwise == pytest.approx(want.normwise, rel=1e-9)
    assert got.median == pytest.approx(want.median, rel=1e-9)


def test_an_infinity_on_the_device_goes_to_3xtf32():
    import cupy as cp

    a, b = operands("uniform", 32, 64, 32, np.random.default_rng(2))
    a[3, 9] = np.inf
    assert admit(cp.asarray(a), cp.asarray(b), xp=cp).moduli is None
