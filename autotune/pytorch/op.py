"""`autotune::matmul` and `autotune::matmul_out`: the tuned SGEMM as PyTorch custom operators.

Operands are two matrices, or two batches of one count. Float32 CUDA tensors run
autotune.matmul's tuned kernel; CPU tensors (float32, float64) torch's own product, so that a
model still runs, moves and is checked on the CPU. In eager mode `autotune.pytorch.mm` (fast.py)
runs the same kernels at less host cost.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from . import impl, native


@torch.library.custom_op("autotune::matmul", mutates_args=())
def matmul(
    a: Tensor,
    b: Tensor,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    precision: str = "highest",
) -> Tensor:
    """Return alpha * op(a) @ op(b) as a new contiguous tensor (op: transpose when the flag is set).

    Args:
        a, b: 2-D matrices or 3-D batches of one count, float32 on CUDA (float32 or float64 on the CPU).
        trans_a, trans_b: read a (b) as its transpose, in place.
        alpha: scale of the product.
        precision: the tier, as torch.set_float32_matmul_precision names it ("highest", "high",
            "medium"); on the CPU torch's product serves every tier.

    Returns:
        A new tensor of shape (M, N) or (batch, M, N), contiguous.

    Raises:
        TypeError: float16 or bfloat16 on CUDA, another device, or mixed operands: never cast.
    """
    # The kernel of every device but CUDA (registered below): the CPU's torch product; other
    # devices are refused by its check.
    return impl.cpu_product(a, b, trans_a, trans_b, alpha, precision)


matmul.register_kernel("cuda")(impl.cuda_product)


# The fake implementation reads no data: the real one's shape and strides, so torch.compile
# traces it with dynamic shapes.
@matmul.register_fake
def _matmul_fake(a, b, trans_a=False, trans_b=False, alpha=1.0, precision="highest"):
    impl.check_kinds(a, b)
    batch, M, N, _ = impl.dims(a, b, trans_a, trans_b, torch._check)
    return a.new_empty(impl.shape(batch, M, N))


def _setup_context(ctx, inputs, output) -> None:
    a, b, trans_a, trans_b, alpha, precision = inputs
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    # dA reads only B, dB only A: keep no tensor a gradient will not read.
    ctx.save_for_backward(b if need_a else None, a if need_b else None)
    ctx.flags = (trans_a, trans_b, alpha, precision)


# Each gradient is a call of the same operator with other trans flags (impl.gradients).
def _backward(ctx, dc: Tensor):
    b, a = ctx.saved_tensors
    needs = (ctx.needs_input_grad[0], ctx.needs_input_grad[1])
    da, db = impl.gradients(matmul, a, b, dc, ctx.flags, needs)
    return da, db, None, None, None, None


matmul.register_autograd(_backward, setup_context=_setup_context)


_NODE: list = []  # fast.py's product node (fast imports this module: it hands it over)


def take_gradients_by(node) -> None:
    """Let the operator's Autograd kernel record a gradient by `node` (fast.py's product_node)."""
    _NODE[:] = [node]


def _short_autograd_kernel():
    """Return a short-road Autograd kernel for autotune::matmul (None: torch lacks its parts).

    For a plain CPU or CUDA tensor it runs the product itself, or with a gradient to record makes
    the eager road's node (fast.py: the same formulas, one Python layer), where custom_op's kernel
    adds two Python layers (some 15 us a call) and with gradients two Functions (some 50 us more).
    The rest (fake, functional or meta tensors, modes, functorch transforms) takes custom_op's
    kernel or the redispatch. native.cpp's C++ kernel, once built, serves CUDA calls before it.
    """
    try:
        full = torch._library.autograd.make_autograd_impl(matmul._opoverload, matmul)
        after_autograd = torch._C._after_autograd_keyset
        # Beneath ADInplaceOrView (a tensor requiring grad has it; it passes an out-of-place
        # operator through): the backend's key.
        backend = torch._C._after_ADInplaceOrView_keyset
        kernels = {getattr(torch._C.DispatchKey, device.upper()): f for device, f in impl.PRODUCTS.items()}
        # Function.apply's test for a functorch transform, whose path the node skips.
        transforming = torch._C._are_functorch_transforms_active
    except (AttributeError, TypeError):
        return None
    is_grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad
    redispatch = matmul._opoverload.redispatch
    node = _NODE

    # As custom_op's kernel: no compile of the product's Python when dynamo is active around the call.
    @torch._disable_dynamo
    def kernel(keyset, *args, **kwargs):
        product = kernels.get((keyset & backend).highestPriorityTypeId())
        if is_grad_enabled() and any_requires_grad(*args):
            if product is None or not node or transforming():
                return full(keyset, *args, **kwargs)
            return node[0](*args, **kwargs)
        if product is None:
            return redispatch(keyset & after_autograd, *args, **kwargs)
        return product(*args, **kwargs)

    return kernel


def _register_short_autograd_kernel(library: torch.library.Library):
    """Register that kernel over custom_op's, and return it (None: custom_op's kept)."""
    kernel = _short_autograd_kernel()
    if kernel is None:
        return None
    with warnings.catch_warnings():  # torch's note that a kernel is overridden: ours, on purpose
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        try:
            library.impl("matmul", kernel, "Autograd", with_keyset=True, allow_override=True)
        except (TypeError, RuntimeError):  # a torch without allow_override, or one that refuses it
            return None
    return kernel


_LIBRARY = torch.library.Library("autotune", "IMPL")  # kept: its registrations last as long as it
# native.cpp's kernels, once built, fall back on these.
native.hand_over(impl.cuda_product, _register_short_autograd_kernel(_LIBRARY))


@torch.library.custom_op("autotune::matmul_out", mutates_args=("out",))
def matmul_out(
    a: Tensor,
    b: Tensor,
    out: Tensor,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    beta: float = 0.0,
    precision: str = "highest",
) -> None:
    """Write out = alpha * op(a) @ op(b) + beta * out in place (out is not read when beta is 0).

    No autograd: this is the in-place form for inference and preallocated buffers; train through
    `matmul`.

    Args:
        a, b, trans_a, trans_b, alpha, precision: as for `matmul`.
        out: (M, N) or (batch, M, N), the dtype and device of a; must not overlap a or b.
        beta: scale of out's old values.
    """
    impl.cpu_product_out(a, b, out, trans_a, trans_b, alpha, beta, precision)


matmul_out.register_kernel("cuda")(impl.cuda_product_out)


@matmul_out.register_fake
def _matmul_out_fake(a, b, out, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, precision="highest"):
    impl.check_kinds(a, b, out)
    impl.out_dims(a, b, out, trans_a, trans_b, torch._check)
