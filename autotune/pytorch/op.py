"""`autotune::matmul` and `autotune::matmul_out`: the tuned SGEMM as PyTorch custom operators.

`matmul(a, b, trans_a, trans_b, alpha, precision)` returns alpha * op(a) @ op(b) (op(x) is the
transpose of x's last two axes when its flag is set) as a new tensor in torch's default
contiguous layout; `matmul_out(a, b, out, ...)` writes alpha * op(a) @ op(b) + beta * out into
`out`, a mutation its schema declares (so functionalization and CUDA graphs see it). Operands are
2-D matrices, or 3-D batches of the same count (no broadcasting: a broadcast operand's gradient
would need a reduction, not a product).

Where each runs (impl.py):
- float32 CUDA tensors: `autotune.matmul`, the kernel tuned for this GPU, shape, layout and tier.
- CPU tensors (float32, and float64 for `gradcheck`): torch's own product. Kept so that a model
  with autotune's layers still runs, moves and checks on the CPU (opcheck runs there); it is no
  tuned kernel, only the same arithmetic.
- Anything else -- a float16 or bfloat16 CUDA tensor, another device, mixed dtypes or devices --
  is a TypeError naming what was passed: autotune is a strict-FP32 SGEMM and never casts quietly.

The fake (meta) implementation reads no data and no concrete size: it allocates what the real
ones return, same shape, same contiguous strides, so `torch.compile(fullgraph=True)` traces
through the operator, dynamic shapes included. Autograd is registered (`register_autograd`):
each gradient is a call of the same operator with other trans flags, reading A, B and dC in place.

These operators are what torch.compile, torch.export, fake tensors and dispatch modes see. In
eager mode `autotune.pytorch.mm` (fast.py) runs the same kernels without torch.library's Python
layers, which cost tens of microseconds a call.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import impl


@torch.library.custom_op("autotune::matmul", mutates_args=())
def matmul(
    a: Tensor,
    b: Tensor,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    precision: str = "highest",
) -> Tensor:
    """alpha * op(a) @ op(b) as a new contiguous tensor (op: transpose when the flag is set).

    Args:
        a, b: 2-D matrices or 3-D batches of one count, float32 on CUDA (float32 or float64 on the CPU).
        trans_a, trans_b: read a (b) as its transpose, in place.
        alpha: scale of the product.
        precision: the tier, as torch.set_float32_matmul_precision names it ("highest", "high",
            "medium"); on the CPU torch's product serves every tier.
    Returns:
        A new tensor of shape (M, N) or (batch, M, N), contiguous.
    """
    # The kernel of every device but CUDA (registered below): the CPU's torch product; other
    # devices are refused by its check.
    return impl.cpu_product(a, b, trans_a, trans_b, alpha, precision)


matmul.register_kernel("cuda")(impl.cuda_product)


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


def _backward(ctx, dc: Tensor):
    b, a = ctx.saved_tensors
    needs = (ctx.needs_input_grad[0], ctx.needs_input_grad[1])
    da, db = impl.gradients(matmul, a, b, dc, ctx.flags, needs)
    return da, db, None, None, None, None


matmul.register_autograd(_backward, setup_context=_setup_context)


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
    """out = alpha * op(a) @ op(b) + beta * out, in place (out is not read when beta is 0).

    Args:
        a, b: as for `matmul`.
        out: (M, N) or (batch, M, N), the dtype and device of a; must not overlap a or b.
        beta: scale of out's old values.
    No autograd: this is the in-place form for inference and preallocated buffers; train through `matmul`.
    """
    impl.cpu_product_out(a, b, out, trans_a, trans_b, alpha, beta, precision)


matmul_out.register_kernel("cuda")(impl.cuda_product_out)


@matmul_out.register_fake
def _matmul_out_fake(a, b, out, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, precision="highest"):
    impl.check_kinds(a, b, out)
    impl.out_dims(a, b, out, trans_a, trans_b, torch._check)
