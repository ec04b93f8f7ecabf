"""`mm`: the operator's product in eager mode without torch.library's Python layers.

Eager calls on plain tensors take a shorter road to the same kernels and gradient formulas
(impl.py). What that road cannot promise to see as the operator would goes through the operator:
torch.compile and export tracing, tensor subclasses (fake tensors, DTensor), dispatch modes and
functorch transforms (vmap, grad).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from . import impl, op, route
from .op import matmul

# Why a second road: a custom_op call goes through the dispatcher into Python (C++ where a plan
# serves it without gradients: native.cpp), and with autograd through a generated
# autograd.Function that rebuilds the schema's defaults: over 15 us without gradients and over
# 60 us with them on a CPU, before the kernel runs.
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch_level = torch._C._functorch.peek_interpreter_stack


def mm(
    a: Tensor,
    b: Tensor,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float | None = None,
    precision: str = "highest",
) -> Tensor:
    """Return alpha op(a) op(b) as autotune::matmul does, at less host cost in eager mode.

    Args and Returns are as for autotune.pytorch.matmul (the operator), which this is under
    torch.compile and wherever the fast road does not apply (see the module's docstring); alpha
    None is 1.
    """
    # None, not 1.0, as the default: dynamo turns a float default it reads under dynamic shapes
    # into a graph input read with .item() (a CPU scalar, which keeps CUDA graphs away).
    alpha = 1.0 if alpha is None else alpha
    kernel = _eager_kernel(a, b)
    if kernel is None:
        return matmul(a, b, trans_a, trans_b, alpha, precision)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _apply_product(_unwrap(a), _unwrap(b), trans_a, trans_b, alpha, precision)
    return kernel(a, b, trans_a, trans_b, alpha, precision)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None, precision: str = "highest") -> Tensor | None:
    """Return x @ weight^T + bias on the eager road as one autograd node, or None off that road.

    None where `mm` would take the operator (see the module's docstring): the caller then
    composes the layer from `mm` and an add, which torch.compile fuses. On CUDA in strict FP32,
    torch's own F.linear where the layer shape's first step timed it faster (route.py).

    Args:
        x: the layer's input as a matrix (rows x in_features).
        weight, bias: the layer's, weight stored out_features x in_features.
        precision: the tier.
    """
    kernel = _eager_kernel(x, weight, bias)
    if kernel is None:
        return None
    grads = _grads(x, weight, bias)
    if kernel is impl.cuda_product and precision == "highest" and not impl.LISTENERS:
        # A recording (LISTENERS) sees every product, so it takes autotune's road alone.
        ours = functools.partial(_linear_road, kernel, precision, True in grads)
        if route.torch_is_faster(x, weight, bias, grads, ours):
            return F.linear(x, weight, bias)
    return _linear_road(kernel, precision, True in grads, x, weight, bias)


def compiled_linear_is_torch(x: Tensor, weight: Tensor, bias: Tensor | None, precision: str) -> bool:
    """Whether torch.compile's trace of a layer call takes torch's F.linear, not the operator.

    In strict FP32 with no symbolic size in the trace: the eager road's choice for the layer
    (route.py), timed while the trace is made (once a layer shape) and put into the graph as a
    constant. Dynamic shapes keep the operator.
    """
    if not (_is_compiling() and precision == "highest"):
        return False
    return _timed_torch_road(x, weight, bias, _grads(x, weight, bias))


def _grads(x: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[bool, bool, bool]:
    """Whether a gradient is recorded for x, weight and bias (no bias: False)."""
    g = torch.is_grad_enabled()
    return (g and x.requires_grad, g and weight.requires_grad, g and bias is not None and bias.requires_grad)


_TIMED = ("cuda",)  # where a compiled layer's roads are timed


def _timed_torch_road(x: Tensor, weight: Tensor, bias: Tensor | None, grads: tuple) -> bool:
    # dynamo calls it with the tensors' real values: a static trace's shapes
    flag = getattr(torch.compiler, "_is_compiling_flag", False)
    try:
        env = torch._guards.TracingContext.try_get().fake_mode.shape_env
        sizes = getattr(env, "backed_var_to_val", None)
        if (env.var_to_val if sizes is None else sizes) or x.device.type not in _TIMED:
            return False
        torch.compiler._is_compiling_flag = False  # the roads run eagerly here, not traced
        ours = functools.partial(_linear_road, _kernel_of(x), "highest", True in grads)
        return route.torch_is_faster(x, weight, bias, grads, ours)
    except Exception:  # noqa: BLE001 - what cannot be timed (a dtype refused, memory) takes the operator
        return False
    finally:
        torch.compiler._is_compiling_flag = flag


_timed_torch_road._dynamo_marked_constant = True  # torch.compiler.assume_constant_result, without importing dynamo


def _linear_road(kernel, precision: str, grad: bool, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """Return x @ weight^T + bias on autotune's eager road: one autograd node where `grad`."""
    if grad:
        return _apply_linear(_unwrap(x), _unwrap(weight), None if bias is None else _unwrap(bias), precision)
    return _linear_forward(kernel, x, weight, bias, precision)


def _eager_kernel(x: Tensor, *others: Tensor | None):
    """Return the eager road's kernel for x's device, or None where the operator must serve.

    The road takes plain tensors (None is no tensor: a layer without bias) outside torch.compile,
    dispatch modes and functorch transforms (see the module's docstring).
    """
    kernel = _kernel_of(x)
    if kernel is None or type(x) not in _PLAIN or _is_compiling() or _dispatch_modes():
        return None
    if _functorch_level() is not None:
        return None
    for t in others:  # a loop, not any(): no generator made on every call of the hot path
        if t is not None and type(t) not in _PLAIN:
            return None
    return kernel


def _kernel_of(x: Tensor):
    """Return the product's function for x's device, or None for a device it does not serve."""
    # is_cuda first: reading x.device.type costs several times more, on every call.
    return impl.cuda_product if x.is_cuda else impl.PRODUCTS.get(x.device.type)


def _linear_forward(kernel, x: Tensor, weight: Tensor, bias: Tensor | None, precision: str) -> Tensor:
    y = kernel(x, weight, False, True, 1.0, precision)
    if bias is not None:
        if bias.dtype != x.dtype or bias.device != x.device:  # x passed the product's own checks
            impl.check_kinds(x, bias)  # what torch's own add would refuse, said as the product says it
        y.add_(bias)  # in place on the product's own new tensor: no second tensor, no autograd node
    return y


class _Product(torch.autograd.Function):
    """The operator's autograd (op.py) on the eager road.

    The same saved tensors and formulas, each gradient a call of `mm` (so that with create_graph
    a second derivative is recorded too).
    """

    @staticmethod
    def forward(ctx, a, b, trans_a, trans_b, alpha, precision):
        need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.save_for_backward(b if need_a else None, a if need_b else None)
        ctx.flags = (trans_a, trans_b, alpha, precision)
        return _kernel_of(a)(a, b, trans_a, trans_b, alpha, precision)

    @staticmethod
    def backward(ctx, dc):
        b, a = ctx.saved_tensors
        needs = (ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        da, db = impl.gradients(mm, a, b, dc, ctx.flags, needs)
        return da, db, None, None, None, None


class _Linear(torch.autograd.Function):
    """A linear layer as one autograd node: dX = dY W ("nn"), dW = dY^T X ("tn"), db = sum dY.

    One node, not a product's and an add's: autograd's bookkeeping is a large part of a small
    layer's host time.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, precision):
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.save_for_backward(weight if need_x else None, x if need_w else None)
        ctx.precision = precision
        return _linear_forward(_kernel_of(x), x, weight, bias, precision)

    @staticmethod
    def backward(ctx, dy):
        weight, x = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = mm(dy, weight, False, False, 1.0, ctx.precision) if need_x else None
        dw = mm(dy, x, True, False, 1.0, ctx.precision) if need_w else None
        db = dy.sum(0) if need_b else None
        return dx, dw, db, None


# The eager road's autograd nodes made by autograd's own apply, without Function.apply's Python
# layer (about 8 us of a call's host time): what that layer adds is the functorch path, which the
# road never takes (_eager_kernel), and a sweep of the arguments for tensors a finished functorch
# transform left wrapped, which _unwrap does here for the tensors alone. Neither class defines
# setup_context, so the layer binds no default arguments either.
_unwrap = torch._C._functorch.unwrap_if_dead
_apply_product = super(torch.autograd.Function, _Product).apply
_apply_linear = super(torch.autograd.Function, _Linear).apply


def product_node(a, b, trans_a=False, trans_b=False, alpha=1.0, precision="highest") -> Tensor:
    """Return alpha op(a) op(b) as one node of the eager road; the operator's arguments.

    op.py's Autograd kernel calls it for plain tensors with a gradient to record.
    """
    return _apply_product(_unwrap(a), _unwrap(b), trans_a, trans_b, alpha, precision)


op.take_gradients_by(product_node)
