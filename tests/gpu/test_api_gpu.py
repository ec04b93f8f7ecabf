"""On the GPU: autotune.matmul and autotune.load."""

import shutil

import cupy as cp
import pytest
from helpers import RESULTS

import autotune
from autotune.api import nearest_entry
from autotune.types import Problem

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _stored_results(tmp_path_factory, monkeypatch):
    """This GPU's stored results: the H200 fixtures (sm_90: a split launch at 4096^3, split-K with
    packed B at 4097^3), filed under this machine's GPU, so that no test reads results/."""
    from autotune.results import live_gpu_slug

    root = tmp_path_factory.getbasetemp() / "api-results"
    if not root.exists():
        shutil.copytree(RESULTS / "nvidia-h200", root / live_gpu_slug())
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(root))


def _ref(a, b, c=None, alpha=1.0, beta=0.0):
    r = alpha * (a.astype(cp.float64) @ b.astype(cp.float64))
    return r if c is None else r + beta * c.astype(cp.float64)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1000, 1000, 1000), (4097, 33, 129), (64, 64, 8192)])
def test_matmul_is_correct(shape):
    M, N, K = shape
    a = cp.random.rand(M, K, dtype=cp.float32) - 0.5
    b = cp.random.rand(K, N, dtype=cp.float32) - 0.5
    c = cp.random.rand(M, N, dtype=cp.float32) - 0.5
    out = autotune.matmul(a, b)
    assert float(cp.linalg.norm(out - _ref(a, b)) / cp.linalg.norm(_ref(a, b))) < 1e-5
    c2 = c.copy()
    autotune.matmul(a, b, out=c2, alpha=2.0, beta=-1.0)
    ref = _ref(a, b, c, 2.0, -1.0)
    assert float(cp.linalg.norm(c2 - ref) / cp.linalg.norm(ref)) < 1e-5
    a_t = cp.asfortranarray(a)  # a non-C-contiguous array is copied, not misread
    # (not bit-identical: a split-K winner adds partial sums with atomics in any order)
    assert float(cp.linalg.norm(autotune.matmul(a_t, b) - _ref(a, b)) / cp.linalg.norm(_ref(a, b))) < 1e-5


def test_load_uses_the_nearest_tuned_shape():
    k = autotune.load("4000x4100x4096")
    slug = k.source.split(" on ")[-1]
    tuned, entry = nearest_entry(Problem(4000, 4100, 4096), slug)
    assert tuned == Problem(4096, 4096, 4096) and k.config.name == entry["config"]["name"]
    assert "tuned for 4096x4096x4096" in k.source


def test_bad_inputs_are_clear_errors():
    a = cp.ones((4, 5), cp.float32)
    with pytest.raises(TypeError, match="float32"):
        autotune.matmul(a.astype(cp.float64), cp.ones((5, 3), cp.float32))
    with pytest.raises(ValueError, match="do not chain"):
        autotune.matmul(a, cp.ones((4, 3), cp.float32))
    with pytest.raises(TypeError, match="cupy.ndarray"):
        autotune.matmul(a.get(), cp.ones((5, 3), cp.float32))
    with pytest.raises(ValueError, match="out must have shape"):
        autotune.matmul(a, cp.ones((5, 3), cp.float32), out=cp.empty((3, 3), cp.float32))
