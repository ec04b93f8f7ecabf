"""On the GPU: autotune.pytorch's operator with the tuned kernels, against torch's own in FP32.

opcheck on CUDA tensors, torch.compile(fullgraph=True) with dynamic shapes, CUDA graph capture
and replay, gradients, and a Linear model's training (TF32 off for torch too).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch without CUDA", allow_module_level=True)

from torch import nn  # noqa: E402

from autotune.pytorch import Linear, matmul, matmul_out, mm, native, record_shapes, route, swap_linear  # noqa: E402
from tests.pytorch import test_pytorch as cpu_tests  # noqa: E402

pytestmark = pytest.mark.gpu
LAYOUTS, _reference = cpu_tests.LAYOUTS, cpu_tests._reference
FP32_REL = 1e-5  # relative norm error two FP32 sums of a few hundred terms stay within


@pytest.fixture(autouse=True)
def _strict_fp32(monkeypatch):
    """torch's own products in FP32, as autotune's "highest" tier is."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)


def _rel(x, y) -> float:
    return float((x - y).norm() / y.norm().clamp_min(1e-30))


def _operands(*args, **kw):
    return cpu_tests._operands(*args, **kw, device="cuda")


@pytest.mark.parametrize("ta,tb", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 3])
def test_opcheck_on_cuda_tensors(ta, tb, batch):
    a, b = _operands(67, 45, 33, ta, tb, batch, grad=True)
    result = torch.library.opcheck(matmul, (a, b, ta, tb, 0.5, "highest"))
    assert set(result.values()) == {"SUCCESS"}, result
    out = torch.rand(*(() if batch is None else (batch,)), 67, 45, device="cuda")
    result = torch.library.opcheck(matmul_out, (a.detach(), b.detach(), out, ta, tb, 1.5, 2.0, "highest"))
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("product", [matmul, mm], ids=["op", "mm"])
@pytest.mark.parametrize("ta,tb", LAYOUTS)
def test_forward_gradients_and_strides_match_torch(ta, tb, product):
    assert native.wait(900) == "ready"  # the operator's gradients: native.cpp's node
    a, b = _operands(130, 70, 90, ta, tb, grad=True)
    c = product(a, b, ta, tb, 0.75)
    ref = _reference(a, b, ta, tb, 0.75)
    assert c.stride() == (70, 1) and _rel(c, ref) < FP32_REL
    g, u, v = (torch.rand_like(t) - 0.5 for t in (ref, a, b))

    def grads(c):  # dA, dB, then the gradient of <dA, u> + <dB, v> (second derivatives)
        first = torch.autograd.grad(c, (a, b), g, create_graph=True)
        return *first, *torch.autograd.grad((first[0] * u).sum() + (first[1] * v).sum(), (a, b))

    for x, y in zip(grads(c), grads(ref), strict=True):
        assert x.shape == y.shape and _rel(x, y) < FP32_REL


def test_mm_s_second_call_of_a_shape_the_cached_launch_answers_as_its_first_and_refuses_alike():
    """The eager road's hot path: a call seen before takes the cached launch, which must answer
    what the full road did (views, transposes, alpha, grad) and leave every refusal to it."""
    rng = torch.Generator(device="cuda").manual_seed(5)
    for M, N, K in ((33, 47, 29), (128, 64, 96), (1, 300, 7)):
        for ta, tb in LAYOUTS:
            a, b = _operands(M, N, K, ta, tb, seed=M + N)
            wide = torch.rand(a.shape[0], a.shape[1] + 3, device="cuda", generator=rng)[:, : a.shape[1]]
            wide.copy_(a)  # the same values read at a longer pitch: another key, another launch
            for x in (a, wide, a.clone().requires_grad_(True)):
                for alpha in (1.0, -0.5):
                    first, second = mm(x, b, ta, tb, alpha), mm(x, b, ta, tb, alpha)
                    ref = _reference(x.detach(), b, ta, tb, alpha)
                    # Within FP32's tolerance, not bit for bit: a split-K kernel's sums land in any order.
                    assert second.shape == (M, N) and second.is_contiguous()
                    assert _rel(first, ref) < FP32_REL and _rel(second, ref) < FP32_REL
    a, b = _operands(40, 24, 16, False, True)
    mm(a, b, False, True)
    with pytest.raises(TypeError, match="float32 only"):
        mm(a.double(), b.double(), False, True)
    with pytest.raises(RuntimeError, match="op\\(a\\) is 40 x 16 but op\\(b\\) is 15 x 24"):
        mm(a, b[:, :15], False, True)
    with pytest.raises(TypeError, match="a is torch.float32 on cuda"):
        mm(a, b.cpu(), False, True)


def test_half_precision_cuda_tensors_are_refused_not_cast():
    a, b = _operands(16, 16, 16, False, True)
    for dtype in (torch.float16, torch.bfloat16):
        for product in (matmul, mm):
            with pytest.raises(TypeError, match="float32 only"):
                product(a.to(dtype), b.to(dtype), False, True)


def test_compile_fullgraph_dynamic_shapes_through_a_linear_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(96, 128), nn.GELU(), nn.Linear(128, 40)).cuda()
    ref = nn.Sequential(nn.Linear(96, 128), nn.GELU(), nn.Linear(128, 40)).cuda()
    ref.load_state_dict(model.state_dict())
    assert swap_linear(model) == ["0", "2"]
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for rows in (33, 64, 100):  # one graph, sizes symbolic
        x = torch.rand(rows, 96, device="cuda") - 0.5
        y = compiled(x)
        assert _rel(y, ref(x)) < FP32_REL
        y.square().sum().backward()
        ref(x).square().sum().backward()
        for p, q in zip(model.parameters(), ref.parameters(), strict=True):
            assert _rel(p.grad, q.grad) < 1e-4
            p.grad = q.grad = None


def test_cuda_graph_captures_and_replays_the_operator():
    """A captured call replays with new data in its inputs.

    Warmed up first (the kernel chosen, compiled and verified, its workspaces made) on a side
    stream, as torch asks, and captured on that same stream: a kernel's workspace is kept per
    stream (gpu/launcher.py), so the capture finds it made and records launches only."""
    a, b = _operands(200, 120, 72, False, True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            matmul(a, b, False, True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        c = matmul(a, b, False, True)
    for seed in (1, 2):
        new_a, new_b = _operands(200, 120, 72, False, True, seed=seed)
        a.copy_(new_a)
        b.copy_(new_b)
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(c, new_a @ new_b.T) < FP32_REL


def test_compile_reduce_overhead_cuda_graphs_a_linear_layer():
    torch.manual_seed(0)
    layer = Linear(64, 48).cuda()
    compiled = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # the first runs warm up and record; the later ones replay
        x = torch.rand(32, 64, device="cuda") - 0.5
        y = compiled(x).clone()
        assert _rel(y, nn.functional.linear(x, layer.weight, layer.bias)) < FP32_REL


@pytest.mark.parametrize("road", ["autotune", "timed"])
def test_linear_training_matches_torchs(monkeypatch, road):
    # "autotune": every step on autotune's kernels; "timed": each layer on the road its first step
    # timed faster (route.py), which for layers this small may be torch's own.
    if road == "autotune":
        monkeypatch.setattr(route, "torch_is_faster", lambda *args: False)
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 10)).cuda()
    ours = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 10)).cuda()
    ours.load_state_dict(ref.state_dict())
    swap_linear(ours)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    opt = torch.optim.SGD(ours.parameters(), lr=0.5)
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.rand(256, 32, device="cuda", generator=g) - 0.5
    teacher = torch.rand(32, 10, device="cuda", generator=g) - 0.5
    target = (x @ teacher).argmax(-1)  # labels a model can learn (random ones barely move in 100 steps)
    losses = []
    for _ in range(100):
        pair = []
        for model, o in ((ref, opt_ref), (ours, opt)):
            o.zero_grad()
            loss = nn.functional.cross_entropy(model(x), target)
            loss.backward()
            o.step()
            pair.append(loss.item())
        losses.append(pair)
    assert losses[-1][0] < 0.5 * losses[0][0]  # it learned (about 2.3 to 0.6 on a CPU)
    for want, got in losses:
        assert abs(got - want) <= 1e-4 * abs(want)


def test_a_small_layers_step_is_timed_once_and_either_road_matches_torch(monkeypatch):
    route.forget()
    torch.manual_seed(0)
    layer = Linear(48, 24).cuda()
    x = (torch.rand(40, 48, device="cuda") - 0.5).requires_grad_(True)
    dy = torch.rand(40, 24, device="cuda") - 0.5
    layer(x).backward(dy)  # the first step: both roads timed, the faster kept
    (key,) = route._TORCH_FASTER
    layer(x).backward(dy)
    assert list(route._TORCH_FASTER) == [key]  # no second timing
    ref = nn.Linear(48, 24).cuda()
    ref.load_state_dict(layer.state_dict())
    xr = x.detach().clone().requires_grad_(True)
    want = ref(xr)
    want.backward(dy)
    for faster, node in ((True, "AddmmBackward0"), (False, "_LinearBackward")):
        monkeypatch.setitem(route._TORCH_FASTER, key, faster)
        x.grad = None
        layer.zero_grad(set_to_none=True)
        y = layer(x)
        assert type(y.grad_fn).__name__ == node
        y.backward(dy)
        assert _rel(y, want) < FP32_REL
        assert _rel(x.grad, xr.grad) < FP32_REL
        assert _rel(layer.weight.grad, ref.weight.grad) < FP32_REL
        assert _rel(layer.bias.grad, ref.bias.grad) < FP32_REL


@pytest.mark.parametrize("faster", [True, False])
def test_a_compiled_layer_of_static_shapes_takes_the_road_timed_while_tracing(monkeypatch, faster):
    route.forget()
    torch._dynamo.reset()
    layer, ref = Linear(48, 24).cuda(), nn.Linear(48, 24).cuda()
    ref.load_state_dict(layer.state_dict())
    x = (torch.rand(40, 48, device="cuda") - 0.5).requires_grad_(True)
    graphs = []

    def backend(gm, inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    torch.compile(layer, fullgraph=True, backend=backend)(x).sum().backward()  # timed while traced
    ((key, torch_faster),) = route._TORCH_FASTER.items()
    assert ("autotune.matmul" in graphs[0]) is not torch_faster
    monkeypatch.setitem(route._TORCH_FASTER, key, faster)
    torch._dynamo.reset()
    x.grad = None
    layer.zero_grad(set_to_none=True)
    y = torch.compile(layer, fullgraph=True)(x)  # inductor, the road given
    y.backward(dy := torch.rand_like(y))
    xr = x.detach().clone().requires_grad_(True)
    want = ref(xr)
    want.backward(dy)
    for got, ok in (
        (y, want),
        (x.grad, xr.grad),
        (layer.weight.grad, ref.weight.grad),
        (layer.bias.grad, ref.bias.grad),
    ):
        assert _rel(got, ok) < FP32_REL


def test_a_long_layer_step_is_timed_too_and_tf32_keeps_autotunes_road_untimed(monkeypatch):
    route.forget()
    layer = Linear(4096, 4096, bias=False).cuda()
    x = torch.rand(4096, 4096, device="cuda") - 0.5
    with torch.no_grad():
        y = layer(x)  # one product of about 2 ms on an H100, which is timed as a small one is
        assert len(route._TORCH_FASTER) == 1
        assert _rel(y, x @ layer.weight.T) < FP32_REL
        assert _rel(layer(x), y) == 0  # the next call takes the road timed faster, without timing
    route.forget()
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    small = Linear(32, 16).cuda()
    small(torch.rand(8, 32, device="cuda"))
    assert not route._TORCH_FASTER  # torch's product would be TF32: not timed, autotune's road


def test_recorder_on_cuda_names_the_linear_layers_gemms(tmp_path):
    model = nn.Sequential(Linear(16, 32), nn.ReLU(), Linear(32, 8)).cuda()
    with record_shapes(tmp_path / "shapes.txt") as log:
        model(torch.rand(40, 16, device="cuda")).sum().backward()
    assert [p.name for p in log.problems] == [
        "40x32x16_nt",
        "40x8x32_nt",
        "40x32x8",
        "8x32x40_tn",
        "32x16x40_tn",
    ]


def test_the_example_under_compile_matches_torchs_loss_curve():
    """examples/pytorch_mlp.py's 300 compiled Adam steps follow torch's loss curve.

    autotune's Linear against nn.Linear from the same weights, under torch.compile(fullgraph=True);
    the curves agree to FP32 rounding, which 300 steps of Adam amplify a little (1e-3 relative)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "pytorch_mlp.py"
    spec = importlib.util.spec_from_file_location("pytorch_mlp", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    want, got = example.run(steps=300, device="cuda", compile=True)
    assert got[-1] < 0.5 * got[0]
    for a, b in zip(want, got, strict=True):
        assert abs(a - b) <= 1e-3 * abs(a)


@pytest.mark.parametrize("lead_a,lead_b", [((), ()), ((3,), (3,)), ((2, 3), ()), ((), (4,))])
def test_autotune_matmul_itself_under_compile_fullgraph(lead_a, lead_b):
    import autotune

    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.rand(*lead_a, 33, 20, device="cuda", generator=g) - 0.5
    b = torch.rand(*lead_b, 17, 20, device="cuda", generator=g) - 0.5
    f = torch.compile(lambda a, b: autotune.matmul(a, b, alpha=0.5, trans_b=True), fullgraph=True, dynamic=True)
    got = f(a, b)
    want = 0.5 * (a @ b.transpose(-2, -1))
    assert got.shape == want.shape and _rel(got, want) < FP32_REL
    c = torch.rand_like(want)
    h = torch.compile(lambda a, b, c: autotune.matmul(a, b, c, 1.0, 2.0, trans_b=True), fullgraph=True)
    want = a @ b.transpose(-2, -1) + 2.0 * c
    out = h(a, b, c)
    assert out.data_ptr() == c.data_ptr() and _rel(c, want) < FP32_REL


def test_a_processes_first_backward_on_autotunes_road_runs(tmp_path):
    # A new process: no earlier backward has bound a CUDA context on autograd's thread (see
    # notes/trust.md). AUTOTUNE_MEASURE=0: the step is not timed, autotune's road serves it.
    import os
    import subprocess
    import sys

    code = """import torch
from autotune.pytorch import Linear
torch.backends.cuda.matmul.allow_tf32 = False
layer, g = Linear(48, 40).cuda(), torch.ones(64, 40, device="cuda")
x = torch.rand(64, 48, device="cuda", requires_grad=True)
layer(x).backward(g)
rel = lambda got, want: float((got - want).abs().max() / want.abs().max())
print(rel(x.grad, g @ layer.weight), rel(layer.weight.grad, g.T @ x))"""
    env = dict(os.environ, AUTOTUNE_MEASURE="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert all(float(v) < FP32_REL for v in r.stdout.split()), r.stdout
