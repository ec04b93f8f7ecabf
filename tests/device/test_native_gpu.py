"""On the GPU: the C++ road (pytorch/native.py) runs the Python road's products, right.

A product's three calls: the full road, the Python road's cached launch (it arms), the C++ road.
"""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch without CUDA", allow_module_level=True)

import cupy  # noqa: E402

from autotune.gpu import launcher  # noqa: E402
from autotune.pytorch import Linear, mm, native  # noqa: E402
from autotune.pytorch.impl import cuda_product  # noqa: E402

pytestmark = pytest.mark.gpu
FP32_REL = 1e-5


@pytest.fixture
def ready(monkeypatch):
    """The C++ road built and on; each shape's first call takes the model's pick (not cuBLAS's)."""
    monkeypatch.setenv("AUTOTUNE_NATIVE", "1")
    monkeypatch.setenv("AUTOTUNE_MEASURE", "0")
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    status = native.wait(900)
    assert status == "ready", status
    return native._ext


def _matrix(rows, cols, trans, offset, g):
    """A rows x cols operand (stored cols x rows where `trans`), `offset` floats into its storage."""
    shape = (cols, rows) if trans else (rows, cols)
    flat = torch.rand(offset + shape[0] * shape[1], device="cuda", generator=g) - 0.5
    return flat[offset:].view(shape)


def _op(x, trans):
    return x.T if trans else x


def _three_calls(ext, a, b, ta, tb, alpha):
    before = ext.hits()
    outs = [cuda_product(a, b, ta, tb, alpha) for _ in range(3)]
    return outs, ext.hits() - before


def test_random_products_on_the_cpp_road_are_right(ready):
    rng, g = random.Random(11), torch.Generator(device="cuda").manual_seed(11)
    served = 0
    for _ in range(60):
        M, N, K = (rng.choice([1, 2, 5, 16, 33, 64, 127, 256, 513, 1000, 2048]) for _ in range(3))
        ta, tb = rng.random() < 0.5, rng.random() < 0.5
        a = _matrix(M, K, ta, rng.choice([0, 1, 4]), g)
        b = _matrix(K, N, tb, rng.choice([0, 2, 4]), g)
        alpha = rng.choice([1.0, -0.5, 3])
        outs, hits = _three_calls(ready, a, b, ta, tb, alpha)
        ref = alpha * (_op(a, ta).double() @ _op(b, tb).double())
        for c in outs:
            assert c.shape == (M, N) and c.is_contiguous() and c.dtype == torch.float32
            err = float((c.double() - ref).norm() / ref.norm().clamp_min(1e-30))
            assert err < FP32_REL, (M, N, K, ta, tb, err)
        served += hits
    assert served >= 30, f"only {served} of 60 third calls came from C++"


def test_a_lapsed_plan_goes_the_python_road_and_is_armed_again(ready, monkeypatch):
    a, b = _matrix(96, 80, False, 0, None), _matrix(80, 72, True, 0, None)
    cuda_product(a, b, False, True)  # the full road
    monkeypatch.setattr(native, "TTL_NS", 0)
    cuda_product(a, b, False, True)  # armed, lapsed at once
    before = ready.hits()
    cuda_product(a, b, False, True)
    assert ready.hits() == before  # the Python road served, and armed it for TTL_NS again
    monkeypatch.setattr(native, "TTL_NS", 10**9)
    cuda_product(a, b, False, True)  # the Python road arms it for 1 s
    c = cuda_product(a, b, False, True)
    assert ready.hits() == before + 1
    assert float((c - a @ b.T).norm() / (a @ b.T).norm()) < FP32_REL


def test_a_side_stream_gets_its_own_plan_and_a_graph_replays_it(ready, monkeypatch):
    monkeypatch.setattr(native, "TTL_NS", 60 * 10**9)  # torch.cuda.graph's entry collects garbage
    a, b = _matrix(200, 120, False, 0, None), _matrix(120, 72, True, 0, None)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            mm(a, b, trans_b=True)
        before = ready.hits()
        mm(a, b, trans_b=True)
        assert ready.hits() == before + 1  # the side stream's own plan
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        c = mm(a, b, trans_b=True)
    assert ready.hits() == before + 2  # captured from C++
    for seed in (1, 2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a.copy_(torch.rand(a.shape, device="cuda", generator=g))
        b.copy_(torch.rand(b.shape, device="cuda", generator=g))
        graph.replay()
        torch.cuda.synchronize()
        assert float((c - a @ b.T).norm() / (a @ b.T).norm()) < FP32_REL


@pytest.mark.parametrize("road", ["C++", "Python"])
def test_a_graph_replays_right_after_its_workspaces_left_their_pools(ready, monkeypatch, road):
    monkeypatch.setattr(native, "TTL_NS", 60 * 10**9)
    if road == "Python":
        monkeypatch.setattr(native, "product", None)
    a, b = _matrix(64, 8192, False, 0, None), _matrix(8192, 48, True, 0, None)  # split K: counters
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            mm(a, b, trans_b=True)
    torch.cuda.current_stream().wait_stream(s)
    graph, kept, hits = torch.cuda.CUDAGraph(), ready.kept(), ready.hits()
    with torch.cuda.graph(graph, stream=s):
        c = mm(a, b, trans_b=True)
    assert ready.hits() > hits or road == "Python"
    native.clear()
    launcher.WORKSPACES.clear()
    assert ready.kept() > kept or road == "Python"  # the captured plan's workspace, kept
    junk = [cupy.full(1 << n, 255, cupy.uint8) for n in (12, 16, 20, 24) for _ in range(8)]
    for seed in (1, 2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a.copy_(torch.rand(a.shape, device="cuda", generator=g))
        graph.replay()
        torch.cuda.synchronize()
        assert float((c - a @ b.T).norm() / (a @ b.T).norm()) < FP32_REL, road
    del junk


def test_a_linear_layer_trains_through_the_cpp_road_as_through_pythons(ready, monkeypatch):
    monkeypatch.setattr("autotune.pytorch.route.torch_is_faster", lambda *args: False)
    torch.manual_seed(0)
    layer = Linear(64, 48).cuda()
    x = (torch.rand(128, 64, device="cuda") - 0.5).requires_grad_()  # dX too
    grads = []
    for served in (False, True, True, True):  # the first builds every key's plan
        monkeypatch.setattr(native, "product", ready.product if served else None)
        layer.zero_grad()
        x.grad = None
        layer(x).square().sum().backward()
        grads.append((layer.weight.grad.clone(), layer.bias.grad.clone(), x.grad.clone()))
    calls = []

    def seen(a, b, ta, tb, tier, alpha):
        c = ready.product(a, b, ta, tb, tier, alpha)
        calls.append((tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), ta, tb, c is not None))
        return c

    monkeypatch.setattr(native, "product", seen)
    layer(x).square().sum().backward()
    assert [c[-1] for c in calls] == [True] * 3, calls  # forward, dX and dW from C++
    with torch.no_grad():
        ref = torch.nn.functional.linear(x, layer.weight, layer.bias)
        assert float((layer(x) - ref).norm() / ref.norm()) < FP32_REL
    for got in grads[1:]:
        for g, first in zip(got, grads[0], strict=True):
            assert torch.allclose(g, first, rtol=1e-5, atol=1e-6)


def test_the_operator_is_served_from_cpp_and_hands_the_rest_to_python(ready):
    from autotune.pytorch.record import record_shapes

    a, b = _matrix(150, 90, False, 0, None), _matrix(90, 70, True, 0, None)
    want = 2.0 * (a.double() @ b.double().T)

    def call(x=a, hits=1):  # the operator's product, right; `hits` plans' (None: not asserted)
        before = ready.hits()
        c = torch.ops.autotune.matmul.default(x, b, False, True, 2.0, "highest")
        assert float((c.detach().double() - want).norm() / want.norm()) < FP32_REL
        assert hits is None or ready.hits() == before + hits
        return c

    call(hits=None), call(hits=None), call()  # the full road, the cached launch (arms), a plan
    f = torch.compile(lambda x, y: mm(x, y, False, True, 2.0), fullgraph=True)
    with torch.no_grad():
        f(a, b)  # compiles
        before = ready.hits()
        c = f(a, b)
        assert ready.hits() == before + 1  # no Python between the graph and the kernel
        assert float((c.double() - want).norm() / want.norm()) < FP32_REL
    x = a.clone().requires_grad_()  # a gradient to record: native.cpp's node, the product a plan's
    y = call(x)
    assert "ProductNode" in y.grad_fn.name()
    for _ in range(4):  # dC of a sum is a broadcast (strides 0): its copy's product is planned
        x.grad, before = None, ready.hits()
        call(x, hits=None).sum().backward()
    assert ready.hits() == before + 2  # the forward and dA
    assert torch.allclose(x.grad, 2.0 * b.sum(0).expand_as(a), rtol=1e-5, atol=1e-5)
    with record_shapes(None) as log:  # a recording sees each call: no plan serves it
        call(hits=0)
    assert sum(log.counts.values()) == 1
    call(hits=None)  # arms the plan again if it lapsed meanwhile
    call()  # served again once the recording ended


@pytest.mark.parametrize(("ta", "tb"), [(False, False), (False, True), (True, False), (True, True)])
def test_a_call_cublas_served_is_torchs_strict_mm_from_then_on(ready, monkeypatch, ta, tb):
    from autotune.dispatch import api, measure

    choose = api._choose
    monkeypatch.setattr(api, "_choose", lambda *args, **kw: measure.CublasKernel(choose(*args, **kw)))
    M, N, K = 173, 91 + 2 * ta + tb, 57  # a shape of its own a case, settled as cuBLAS's
    a, b = _matrix(M, K, ta, 1, None), _matrix(K, N, tb, 0, None)
    outs, hits = _three_calls(ready, a, b, ta, tb, -1.5)
    assert hits == 1  # the third call: torch's mm from C++
    want = -1.5 * (_op(a, ta).double() @ _op(b, tb).double())
    for c in outs:
        assert c.shape == (M, N) and c.is_contiguous()
        assert float((c.double() - want).norm() / want.norm()) < FP32_REL
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    before = ready.hits()
    c = cuda_product(a, b, ta, tb, -1.5)  # torch's mm would be TF32: the Python road serves
    assert ready.hits() == before and float((c.double() - want).norm() / want.norm()) < FP32_REL
