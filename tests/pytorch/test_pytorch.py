"""autotune.pytorch on the CPU, where its kernel is torch's own product.

The operator's registration (opcheck's four checks), its fake implementation's strides, its
gradients, torch.compile through it, mm's eager road, Linear, swap_linear and the recorder:
everything but the tuned kernel itself (tests/device/test_pytorch_gpu.py runs that).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from autotune.cli.inputs import parse_problems  # noqa: E402
from autotune.core.types import Problem  # noqa: E402
from autotune.pytorch import Linear, fast, matmul, matmul_out, mm, record_shapes, swap_linear  # noqa: E402

LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]


def _operands(M, N, K, ta, tb, batch=None, dtype=torch.float32, grad=False, seed=0, device="cpu"):
    """A and B stored as the layout says (A K x M when trans_a, B N x K when trans_b)."""
    g = torch.Generator(device).manual_seed(seed)
    lead = () if batch is None else (batch,)
    a = torch.randn(*lead, *((K, M) if ta else (M, K)), generator=g, dtype=dtype, device=device)
    b = torch.randn(*lead, *((N, K) if tb else (K, N)), generator=g, dtype=dtype, device=device)
    return a.requires_grad_(grad), b.requires_grad_(grad)


def _reference(a, b, ta, tb, alpha=1.0):
    return alpha * ((a.transpose(-2, -1) if ta else a) @ (b.transpose(-2, -1) if tb else b))


@pytest.mark.parametrize("ta,tb", LAYOUTS)
@pytest.mark.parametrize("shape", [(3, 5, 4, None), (1, 7, 2, None), (4, 3, 6, 2)])
def test_opcheck_passes_its_four_checks(shape, ta, tb):
    M, N, K, batch = shape
    a, b = _operands(M, N, K, ta, tb, batch, grad=True)
    result = torch.library.opcheck(matmul, (a, b, ta, tb, 0.5, "highest"))
    assert set(result.values()) == {"SUCCESS"}, result
    assert set(result) == {"test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"}


@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_opcheck_passes_for_the_out_variant_a_declared_mutation(beta):
    a, b = _operands(3, 5, 4, False, True)
    out = torch.randn(3, 5)
    result = torch.library.opcheck(matmul_out, (a, b, out, False, True, 1.5, beta, "highest"))
    assert set(result.values()) == {"SUCCESS"}, result
    schema = torch.ops.autotune.matmul_out.default._schema
    assert [x.name for x in schema.arguments if x.alias_info is not None and x.alias_info.is_write] == ["out"]
    assert not torch.ops.autotune.matmul.default._schema.is_mutable


def test_out_variant_computes_alpha_ab_plus_beta_c_and_ignores_nan_when_beta_is_zero():
    a, b = _operands(4, 6, 5, True, False)
    c = torch.randn(4, 6)
    want = 2.0 * (a.T @ b) + 3.0 * c
    matmul_out(a, b, c, True, False, 2.0, 3.0)
    torch.testing.assert_close(c, want)
    nan = torch.full((4, 6), float("nan"))
    matmul_out(a, b, nan, True, False, 1.0, 0.0)
    torch.testing.assert_close(nan, a.T @ b)


@pytest.mark.parametrize("ta,tb", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 3])
def test_fake_output_has_the_real_outputs_shape_and_strides(ta, tb, batch):
    a, b = _operands(5, 7, 3, ta, tb, batch)
    real = matmul(a, b, ta, tb)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = matmul(mode.from_tensor(a), mode.from_tensor(b), ta, tb)
    assert fake.shape == real.shape and fake.stride() == real.stride() and real.is_contiguous()
    torch.testing.assert_close(real, _reference(a, b, ta, tb))


def test_the_operators_autograd_kernel_is_the_short_one_over_custom_ops():
    """autotune::matmul's Autograd kernel is op.py's (a product with no gradient to record runs at
    once, one to record makes fast.py's node), custom_op's kept beneath it for the rest."""
    dump = torch._C._dispatch_dump("autotune::matmul").splitlines()
    active = [line for line in dump if line.startswith("Autograd[alias]:")]
    assert len(active) == 1 and "autotune/pytorch/op.py" in active[0].replace("\\", "/"), dump
    a, b = _operands(6, 5, 4, True, False)
    with torch.no_grad():
        torch.testing.assert_close(matmul(a, b, True, False, 0.5), 0.5 * a.T @ b)
    ag = a.clone().requires_grad_(True)
    with torch.no_grad():  # a tensor requiring grad, none recorded: the product, no node
        assert matmul(ag, b, True, False).grad_fn is None
    y = matmul(ag, b, True, False)
    assert type(y.grad_fn).__name__ == "_ProductBackward"  # the eager road's node, not custom_op's
    y.sum().backward()
    torch.testing.assert_close(ag.grad, (torch.ones(6, 5, dtype=a.dtype) @ b.T).T)


def test_refuses_what_it_does_not_serve():
    a, b = _operands(3, 4, 5, False, False)
    with pytest.raises(TypeError, match="float32 or float64"):
        matmul(a.half(), b.half())
    with pytest.raises(TypeError, match="a is torch.float32"):
        matmul(a, b.double())
    with pytest.raises(RuntimeError, match="op\\(a\\) is 3 x 5 but op\\(b\\) is 4 x 5"):
        matmul(a, b, False, True)
    with pytest.raises(RuntimeError, match="two matrices or two batches"):
        matmul(a, b[None])


@pytest.mark.parametrize("ta,tb", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 2])
def test_gradients_equal_torchs(ta, tb, batch):
    a, b = _operands(6, 5, 4, ta, tb, batch, grad=True)
    g = torch.randn(*(() if batch is None else (batch,)), 6, 5)
    got = torch.autograd.grad(matmul(a, b, ta, tb, 0.75), (a, b), g)
    want = torch.autograd.grad(_reference(a, b, ta, tb, 0.75), (a, b), g)
    for x, y in zip(got, want, strict=True):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("product", [matmul, mm], ids=["op", "mm"])
@pytest.mark.parametrize("ta,tb", LAYOUTS)
def test_gradcheck_in_float64(ta, tb, product):
    a, b = _operands(4, 3, 5, ta, tb, dtype=torch.float64, grad=True)
    assert torch.autograd.gradcheck(lambda x, y: product(x, y, ta, tb, 1.25), (a, b))
    assert torch.autograd.gradgradcheck(lambda x, y: product(x, y, ta, tb, 1.25), (a, b))


@pytest.mark.parametrize("ta,tb", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 2])
def test_mm_eager_road_equals_the_operator_with_its_gradients(ta, tb, batch, monkeypatch):
    a, b = _operands(6, 5, 4, ta, tb, batch, grad=True)
    g = torch.randn(*(() if batch is None else (batch,)), 6, 5)
    with monkeypatch.context() as m, record_shapes() as log:
        m.setattr(fast, "matmul", None)  # the eager road never calls the operator
        c = mm(a, b, ta, tb, 0.5)
        got = torch.autograd.grad(c, (a, b), g)
    want_c = matmul(a, b, ta, tb, 0.5)
    want = torch.autograd.grad(want_c, (a, b), g)
    assert c.stride() == want_c.stride() and torch.equal(c, want_c)
    assert all(torch.equal(x, y) for x, y in zip(got, want, strict=True))
    assert len(log.problems) == 3 and log.problems[0].name.startswith("6x5x4")  # recorded: C, dA, dB
    with torch.no_grad():
        assert not mm(a, b, ta, tb).requires_grad


def test_mm_takes_the_operator_wherever_torch_must_see_it():
    """Fake tensors, dispatch modes, traces and meta tensors get the registered operator.

    There its fake implementation runs, and a trace names it; plain eager tensors take the short road."""
    a, b = _operands(3, 5, 4, False, True)
    with _Ops() as ops:
        mm(a, b, False, True)
    assert ops.names == ["autotune.matmul"]
    with FakeTensorMode() as mode:
        fake = mm(mode.from_tensor(a), mode.from_tensor(b), False, True)
    assert fake.shape == (3, 5) and fake.stride() == (5, 1)
    meta = mm(a.to("meta"), b.to("meta"), False, True)
    assert meta.device.type == "meta" and meta.shape == (3, 5)
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda x, y: mm(x, y, False, True))(a, b)
    assert "autotune.matmul" in gm.code
    with pytest.raises(TypeError, match="float32 or float64"):
        mm(a.half(), b.half(), False, True)


def test_tensors_a_finished_functorch_transform_left_take_the_eager_road_with_gradients():
    """A tensor kept from inside torch.func.grad (a dead wrapper) is served as the plain tensor it
    wraps, by mm and by Linear, and their gradients are torch's."""
    kept = []

    def f(t):
        kept.append(t)
        return t.sum()

    x = torch.rand(3, 4, dtype=torch.float64)
    torch.func.grad(f)(x)
    (dead,) = kept
    assert torch._C._functorch.is_functorch_wrapped_tensor(dead)
    w = torch.rand(5, 4, dtype=torch.float64, requires_grad=True)
    y = mm(dead, w, False, True)
    torch.testing.assert_close(y, x @ w.T)
    y.sum().backward()
    torch.testing.assert_close(w.grad, torch.ones(3, 5, dtype=torch.float64).T @ x)
    layer = Linear(4, 5).double()
    torch.testing.assert_close(layer(dead), x @ layer.weight.T + layer.bias)


class _Ops(TorchDispatchMode):
    """The operators run under it, by name."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


# (trans_a, trans_b) of C = op(A) op(B), M, N, K = 6, 5, 4 -> the problems of dA then dB: the
# transposes each gradient needs are read as layouts, never made
BACKWARD = {
    (False, False): ["6x4x5_nt", "4x5x6_tn"],  # dA = dC B^T, dB = A^T dC
    (False, True): ["6x4x5", "5x4x6_tn"],  # dA = dC B, dB = dC^T A
    (True, False): ["4x6x5_nt", "4x5x6"],  # dA = B dC^T, dB = A dC
    (True, True): ["4x6x5_tt", "5x4x6_tt"],  # dA = B^T dC^T, dB = dC^T A^T
}


@pytest.mark.parametrize("ta,tb", LAYOUTS)
def test_backward_is_two_calls_of_the_op_in_place_and_copies_nothing(ta, tb):
    a, b = _operands(6, 5, 4, ta, tb, grad=True)
    c = matmul(a, b, ta, tb)
    g = torch.randn(6, 5)
    with _Ops() as ops, record_shapes() as log:
        c.backward(g)
    assert [p.name for p in log.problems] == BACKWARD[ta, tb]
    # nothing but the two products (and autograd's detach as it stores .grad): no transpose,
    # clone or contiguous copy of A, B or dC made for them
    assert [n for n in ops.names if n != "aten.detach"] == ["autotune.matmul"] * 2, ops.names


def test_only_the_gradients_asked_for_are_computed_and_saved():
    a, b = _operands(6, 5, 4, False, True)
    a.requires_grad_(True)
    with record_shapes() as log:
        c = matmul(a, b, False, True)
        c.backward(torch.ones_like(c))
    assert b.grad is None and a.grad is not None
    assert [p.layout for p in log.problems] == ["nt", "nn"]  # forward, then dA = dC B only


@pytest.mark.parametrize("product", [matmul, mm], ids=["op", "mm"])
def test_torch_compile_fullgraph_runs_the_op_with_dynamic_shapes_compiled_once(product):
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x, w: product(x, w, False, True) * 2, fullgraph=True, dynamic=True, backend=counter)
    for M in (5, 9, 17):
        x, w = _operands(M, 7, 3 + M % 2, False, True, grad=True)
        y = compiled(x, w)
        torch.testing.assert_close(y, 2 * x @ w.T)
        y.sum().backward()
        torch.testing.assert_close(w.grad, 2 * torch.ones(M, 7).T @ x.detach())
    assert counter.frame_count == 1  # one graph for every size: nothing specialised on one
    assert counter.op_count >= 1


def test_torch_compile_fullgraph_runs_linear_on_batches_of_any_size():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch.manual_seed(0)
    layer = Linear(6, 4)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(layer, fullgraph=True, dynamic=True, backend=counter)
    for lead in ((3, 5), (2, 7), (11, 2)):  # sizes of 1 are specialised by torch, whatever the op
        x = torch.randn(*lead, 6, requires_grad=True)
        y = compiled(x)
        torch.testing.assert_close(y, nn.functional.linear(x, layer.weight, layer.bias))
        y.sum().backward()
    assert counter.frame_count == 1


@pytest.mark.parametrize("torch_faster", [True, False, None])  # None: the timing fails, the operator serves
def test_a_compiled_layer_of_static_shapes_takes_the_road_its_timing_chose(monkeypatch, torch_faster):
    calls, graphs, ran = [], [], []

    def timed(x, weight, bias, grads, ours):  # route's timing, as the trace makes it: real tensors
        calls.append((type(x), tuple(x.shape), tuple(weight.shape), grads))
        ran.append((ours(x, weight, bias), nn.functional.linear(x, weight, bias)))  # run eagerly
        if torch_faster is None:
            raise RuntimeError("out of memory")
        return torch_faster

    def backend(gm, inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    monkeypatch.setattr(fast.route, "torch_is_faster", timed)
    layer, x = Linear(6, 4), torch.randn(3, 5, 6, requires_grad=True)
    torch.compile(layer, fullgraph=True, backend=backend)(x)
    assert calls == [] and "autotune.matmul" in graphs[0]  # on the CPU: the operator, untimed
    monkeypatch.setattr(fast, "_TIMED", ("cpu",))
    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(x), nn.functional.linear(x, layer.weight, layer.bias))
    assert calls == [(torch.Tensor, (15, 6), (4, 6), (True, True, True))]
    torch.testing.assert_close(*ran[0])
    assert ("autotune.matmul" in graphs[1]) is not bool(torch_faster), graphs[1]
    torch._dynamo.reset()
    torch.compile(layer, fullgraph=True, dynamic=True, backend=backend)(x)
    assert len(calls) == 1 and "autotune.matmul" in graphs[2]  # dynamic shapes: the operator, untimed


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="inductor needs a C compiler")
def test_inductor_compiles_a_linear_layer_through_the_op():
    torch.manual_seed(0)
    layer = Linear(6, 4)
    compiled = torch.compile(layer, fullgraph=True)
    x = torch.randn(3, 5, 6)
    torch.testing.assert_close(compiled(x), nn.functional.linear(x, layer.weight, layer.bias))


def test_linear_equals_nn_linear_forward_and_backward():
    torch.manual_seed(0)
    ref = nn.Linear(8, 5)
    ours = Linear(8, 5)
    ours.load_state_dict(ref.state_dict())
    assert list(ours.state_dict()) == list(ref.state_dict())
    x = torch.randn(2, 3, 8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    y, y_ref = ours(x), ref(x2)
    assert y.shape == (2, 3, 5)
    torch.testing.assert_close(y, y_ref)
    g = torch.randn_like(y)
    y.backward(g)
    y_ref.backward(g)
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad)


@pytest.mark.parametrize("lead", [(), (7,), (2, 3)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("wants", ["x", "w", "b", "xwb"])
def test_linear_gradients_of_any_input_set_match_nn_linear(lead, bias, wants):
    torch.manual_seed(1)
    ref = nn.Linear(6, 4, bias=bias)
    ours = Linear(6, 4, bias=bias)
    ours.load_state_dict(ref.state_dict())
    for layer in (ref, ours):
        layer.weight.requires_grad_("w" in wants)
        if bias:
            layer.bias.requires_grad_("b" in wants)
    x = torch.randn(*lead, 6)
    xs = [x.clone().requires_grad_("x" in wants) for _ in range(2)]
    y, y_ref = ours(xs[0]), ref(xs[1])
    torch.testing.assert_close(y, y_ref)
    assert y.shape == y_ref.shape
    if not y_ref.requires_grad:  # only a bias-less layer asked for its bias's gradient
        assert not y.requires_grad
        return
    g = torch.randn_like(y)
    y.backward(g)
    y_ref.backward(g)
    for mine, theirs in [(xs[0], xs[1]), (ours.weight, ref.weight)] + ([(ours.bias, ref.bias)] if bias else []):
        assert (mine.grad is None) == (theirs.grad is None)
        if theirs.grad is not None:
            torch.testing.assert_close(mine.grad, theirs.grad)


def test_linear_in_eager_mode_is_one_autograd_node_with_gradients_of_every_order():
    layer = Linear(5, 3).double()
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    # One node, straight onto the three leaves: no separate add, view or transpose nodes.
    assert type(y.grad_fn).__name__ == "_LinearBackward"
    leaves = {type(f).__name__ for f, _ in y.grad_fn.next_functions}
    assert leaves == {"AccumulateGrad"}
    params = (x, layer.weight, layer.bias)
    fn = lambda x, w, b: fast.linear(x, w, b)  # noqa: E731
    assert torch.autograd.gradcheck(fn, params)
    assert torch.autograd.gradgradcheck(fn, params)


def test_linear_without_grad_records_nothing_and_under_a_dispatch_mode_takes_the_operator():
    layer = Linear(6, 4)
    x = torch.randn(3, 6)
    want = nn.functional.linear(x, layer.weight, layer.bias)
    with torch.no_grad():
        y = layer(x)
    assert not y.requires_grad and y.grad_fn is None
    torch.testing.assert_close(y, want)
    # A mode sees every operator run: the layer is then the operator and an add, as torch.compile traces it.
    with _Ops() as ops:
        y = layer(x)
    torch.testing.assert_close(y, want)
    assert "autotune.matmul" in ops.names and "aten.add" in ops.names, ops.names


def test_linear_reads_its_input_through_a_view_and_its_weight_as_nt():
    layer = Linear(4, 3, bias=False)
    x = torch.randn(2, 5, 4)
    with _Ops() as ops, record_shapes() as log:
        layer(x)
    assert not [n for n in ops.names if "clone" in n or "copy" in n], ops.names
    assert log.problems == [Problem(10, 3, 4, "nt")]


def test_a_bias_of_another_dtype_or_device_is_refused_as_the_product_refuses_its_operands():
    from autotune.pytorch.fast import linear

    x, w = torch.rand(4, 3), torch.rand(5, 3)
    for bias in (torch.rand(5, dtype=torch.float64), torch.rand(5, device="meta")):
        with torch.no_grad(), pytest.raises(TypeError, match=f"b is {bias.dtype} on {bias.device}, a is torch.float32"):
            linear(x, w, bias)
    assert torch.allclose(linear(x, w, torch.ones(5)), x @ w.T + 1)


def test_swap_linear_takes_float32_layers_only_and_says_why_not_the_others():
    model = nn.Sequential(
        nn.Linear(4, 8),
        nn.ReLU(),
        nn.Linear(8, 8).half(),
        nn.Linear(8, 8).to(torch.bfloat16),
        nn.Sequential(nn.Linear(8, 2)),
    )
    model.add_module("attn", nn.MultiheadAttention(8, 2))
    model.add_module("meta", nn.Linear(8, 8, device="meta"))
    params = [id(p) for p in model.parameters()]
    swapped = swap_linear(model)
    assert swapped == ["0", "4.0"]
    assert set(swapped.skipped) == {"2", "3", "attn.out_proj", "meta"}
    assert "on meta" in swapped.skipped["meta"]
    assert "float16" in swapped.skipped["2"] and "bfloat16" in swapped.skipped["3"]
    assert "NonDynamicallyQuantizableLinear" in swapped.skipped["attn.out_proj"]
    assert type(model[0]) is Linear and type(model[2]) is nn.Linear and type(model[4][0]) is Linear
    assert [id(p) for p in model.parameters()] == params  # the same parameters, no copy
    assert swap_linear(model) == []  # swapped layers are not swapped again
    assert "autotune Linear: 0, 4.0" in str(swapped)


def test_swapped_model_computes_what_it_did():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    x = torch.randn(7, 6)
    before = model(x).detach()
    swap_linear(model)
    torch.testing.assert_close(model(x), before)


def _mlp_pass(model, x):
    model(x).square().sum().backward()


def test_recorder_writes_the_gemms_of_a_forward_and_backward_pass(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    swap_linear(model)
    x = torch.randn(4, 10, 16)  # 40 rows once the batch axes fold into M
    path = tmp_path / "shapes.txt"
    with record_shapes(path) as log:
        _mlp_pass(model, x)
        _mlp_pass(model, x)
    want = [
        Problem(40, 32, 16, "nt"),  # layer 0 forward: X W0^T
        Problem(40, 8, 32, "nt"),  # layer 2 forward
        Problem(40, 32, 8, "nn"),  # layer 2 dX = dY W2
        Problem(8, 32, 40, "tn"),  # layer 2 dW = dY^T X
        Problem(32, 16, 40, "tn"),  # layer 0 dW (x needs no gradient: no dX)
    ]
    assert log.problems == want
    assert set(log.counts.values()) == {2}
    text = path.read_text()
    assert text.splitlines()[1].split() == ["40x32x16_nt", "#", "2", "calls"]
    args = argparse.Namespace(
        sizes=None,
        shapes_file=path,
        size=None,
        m=None,
        n=None,
        k=None,
        layout="nn",
        batch=1,
        beta=0.0,
        precision="highest",
    )
    assert parse_problems(args) == want  # what `autotune search --shapes-file` will tune


def test_recorder_notes_batch_tier_and_beta_and_stops_at_the_end_of_the_block():
    a, b = _operands(3, 4, 5, False, False, batch=6)
    with record_shapes() as log:
        matmul(a, b, False, False, 1.0, "high")
        matmul_out(a[0], b[0], torch.zeros(3, 4), False, False, 1.0, 2.0)
        matmul(a.double(), b.double())  # no SGEMM: not recorded
    matmul(a, b)
    assert [p.name for p in log.problems] == ["3x4x5_b6_high", "3x4x5_beta2"]


def _example():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "pytorch_mlp.py"
    spec = importlib.util.spec_from_file_location("pytorch_mlp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_trains_the_same_on_the_cpu():
    want, got = _example().run(steps=4, device="cpu", compile=False)
    assert len(got) == 4 and got[-1] < got[0]
    for a, b in zip(want, got, strict=True):
        assert abs(a - b) <= 1e-5 * abs(a)


def test_linear_is_torchs_inside_autocast_and_refuses_half_inputs_outside():
    torch.manual_seed(0)
    layer = Linear(8, 4)
    x = torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16), record_shapes() as log:
        y = layer(x)
    assert y.dtype == torch.bfloat16 and log.problems == []  # torch's product, as autocast asks
    with pytest.raises(TypeError, match="a is torch.bfloat16"):
        layer(x.bfloat16())


def test_torch_export_keeps_the_operator_with_a_dynamic_batch():
    from torch.export import Dim, export

    layer = Linear(6, 4)
    program = export(layer, (torch.randn(5, 6),), dynamic_shapes={"x": {0: Dim("rows", min=2)}})
    assert "torch.ops.autotune.matmul.default" in program.graph_module.code
    x = torch.randn(9, 6)
    torch.testing.assert_close(program.module()(x), nn.functional.linear(x, layer.weight, layer.bias))


@pytest.mark.parametrize(
    "shapes",
    [((5, 4), (4, 3)), ((2, 5, 4), (2, 4, 3)), ((2, 3, 5, 4), (4, 3)), ((5, 4), (6, 4, 3)), ((1, 5, 4), (3, 4, 3))],
)
def test_autotune_matmul_itself_compiles_fullgraph_as_the_operator(monkeypatch, shapes):
    import autotune
    from autotune.pytorch import traced

    # CPU tensors stand for CUDA ones here: the route's only device rule is patched to take them.
    monkeypatch.setattr(traced, "DEVICES", ("cuda", "cpu"))
    torch._dynamo.reset()
    a, b = torch.randn(*shapes[0]), torch.randn(*shapes[1])
    f = torch.compile(lambda a, b: autotune.matmul(a, b, alpha=0.5), fullgraph=True, backend="eager")
    torch.testing.assert_close(f(a, b), 0.5 * (a @ b))
    with _Ops() as ops:
        traced.traced_matmul(a, b, None, 0.5)
    assert "autotune.matmul" in ops.names


def test_autotune_matmul_compiled_writes_out_in_place_and_refuses_what_eager_refuses(monkeypatch):
    import autotune
    from autotune.pytorch import traced

    torch._dynamo.reset()
    a, b, c = torch.randn(5, 4), torch.randn(3, 4), torch.randn(5, 3)
    f = torch.compile(lambda a, b, c: autotune.matmul(a, b, c, 2.0, 0.5, trans_b=True), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="CUDA device"):  # as in eager mode: a CPU tensor is no GPU array
        f(a, b, c)
    monkeypatch.setattr(traced, "DEVICES", ("cuda", "cpu"))
    torch._dynamo.reset()
    want = 2.0 * a @ b.T + 0.5 * c
    out = f(a, b, c)
    assert out.data_ptr() == c.data_ptr()
    torch.testing.assert_close(c, want)
    g = torch.compile(lambda a, b: autotune.matmul(a, b, beta=1.0), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="beta != 0 needs an `out`"):
        g(a, b.T)
