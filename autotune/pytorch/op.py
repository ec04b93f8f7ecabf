"""`autotune::matmul` and `autotune::matmul_out`: the tuned SGEMM as PyTorch custom operators.

`matmul(a, b, trans_a, trans_b, alpha, precision)` returns alpha * op(a) @ op(b) (op(x) is the
transpose of x's last two axes when its flag is set) as a new tensor in torch's default
contiguous layout; `matmul_out(a, b, out, ...)` writes alpha * op(a) @ op(b) + beta * out into
`out`, a mutation its schema declares (so functionalization and CUDA graphs see it). Operands are
2-D matrices, or 3-D batches of the same count (no broadcasting: a broadcast operand's gradient
would need a reduction, not a product).

Where each runs:
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
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..dispatch.api import matmul as _autotune_matmul

_CPU_DTYPES = (torch.float32, torch.float64)

# Callbacks that the recorder (record.py) adds: each is told every product run, as
# (M, N, K, layout, batch, beta, precision). Empty unless a recording is under way: one truth test a call.
LISTENERS: list[Callable[..., None]] = []


def _dims(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool):
    """(batch or None, M, N, K of A, K of B), read from shapes only (symbolic under compile)."""
    torch._check(a.dim() in (2, 3) and b.dim() == a.dim(), lambda: _ndim_error(a, b))
    M, Ka = (a.shape[-1], a.shape[-2]) if trans_a else (a.shape[-2], a.shape[-1])
    Kb, N = (b.shape[-1], b.shape[-2]) if trans_b else (b.shape[-2], b.shape[-1])
    torch._check(Ka == Kb, lambda: f"autotune.matmul: op(a) is {M} x {Ka} but op(b) is {Kb} x {N}")
    batch = None
    if a.dim() == 3:
        torch._check(a.shape[0] == b.shape[0], lambda: f"batch counts differ: {a.shape[0]} and {b.shape[0]}")
        batch = a.shape[0]
    return batch, M, N, Ka


def _ndim_error(a: Tensor, b: Tensor) -> str:
    return f"autotune.matmul takes two matrices or two batches of them, got {a.dim()}-D and {b.dim()}-D"


def _check_kinds(a: Tensor, b: Tensor, out: Tensor | None = None) -> None:
    """A TypeError unless the operands share a device and a dtype this operator serves there."""
    named = [("a", a), ("b", b)] + ([("out", out)] if out is not None else [])
    for name, x in named:
        if x.device != a.device or x.dtype != a.dtype:
            raise TypeError(f"autotune.matmul: {name} is {x.dtype} on {x.device}, a is {a.dtype} on {a.device}")
    kind = a.device.type
    if kind == "cuda" and a.dtype != torch.float32:
        raise TypeError(
            f"autotune.matmul runs float32 only (strict FP32 SGEMM), got {a.dtype} on {a.device}: "
            "keep torch's own product (nn.Linear) for this layer, or cast it to float32 yourself"
        )
    if kind == "cpu" and a.dtype not in _CPU_DTYPES:
        raise TypeError(f"autotune.matmul on the CPU takes float32 or float64, got {a.dtype}")
    if kind not in ("cpu", "cuda", "meta"):
        raise TypeError(f"autotune.matmul runs on CUDA (and on the CPU through torch), got a tensor on {a.device}")


def _shape(batch, M, N) -> tuple:
    return (M, N) if batch is None else (batch, M, N)


def _note(a: Tensor, batch, M, N, K, trans_a: bool, trans_b: bool, beta: float, precision: str) -> None:
    """Tell the recorders of one product (float32 only: the others are no SGEMM to tune)."""
    if a.dtype == torch.float32:
        layout = "nt"[trans_a] + "nt"[trans_b]
        for listener in LISTENERS:
            listener(int(M), int(N), int(K), layout, int(batch or 1), float(beta), precision)


def _torch_product(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool) -> tuple[Tensor, Tensor]:
    return (a.transpose(-2, -1) if trans_a else a), (b.transpose(-2, -1) if trans_b else b)


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
    # The kernel of every device but CUDA (which has its own, below): the CPU's torch fallback.
    _check_kinds(a, b)
    batch, M, N, K = _dims(a, b, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, 0.0, precision)
    c = a.new_empty(_shape(batch, M, N))  # the layout the fake promises, whatever torch's mm picks
    opa, opb = _torch_product(a, b, trans_a, trans_b)
    torch.matmul(opa, opb, out=c)
    return c.mul_(alpha) if alpha != 1 else c


@matmul.register_kernel("cuda")
def _matmul_cuda(a, b, trans_a=False, trans_b=False, alpha=1.0, precision="highest"):
    _check_kinds(a, b)
    batch, M, N, K = _dims(a, b, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, 0.0, precision)
    if M == 0 or N == 0 or K == 0:  # no GEMM to launch; an empty K sums nothing
        return a.new_zeros(_shape(batch, M, N))
    # The autograd layer hands the kernel the caller's tensors, requires_grad and all; autotune
    # refuses those (it records no graph), and here the graph is the operator's own.
    a = a.detach() if a.requires_grad else a
    b = b.detach() if b.requires_grad else b
    return _autotune_matmul(a, b, alpha=alpha, trans_a=trans_a, trans_b=trans_b, precision=precision)


@matmul.register_fake
def _matmul_fake(a, b, trans_a=False, trans_b=False, alpha=1.0, precision="highest"):
    _check_kinds(a, b)
    batch, M, N, _ = _dims(a, b, trans_a, trans_b)
    return a.new_empty(_shape(batch, M, N))


def _setup_context(ctx, inputs, output) -> None:
    a, b, trans_a, trans_b, alpha, precision = inputs
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    # dA reads only B, dB only A: keep no tensor a gradient will not read.
    ctx.save_for_backward(b if need_a else None, a if need_b else None)
    ctx.flags = (trans_a, trans_b, alpha, precision)


def _backward(ctx, dc: Tensor):
    """dA and dB as calls of the operator itself, reading A, B and dC where they lie.

    With C = alpha op(A) op(B): d op(A) = alpha dC op(B)^T and d op(B) = alpha op(A)^T dC; a
    transposed operand's gradient is the transpose of that, written as the product with its
    factors swapped, so every case is one call with trans flags and no operand is copied.
    """
    b, a = ctx.saved_tensors
    ta, tb, alpha, precision = ctx.flags
    da = db = None
    if ctx.needs_input_grad[0]:
        # nn/nt: dA = dC op(B)^T;  tn/tt: dA = (dC op(B)^T)^T = op(B) dC^T
        da = matmul(b, dc, tb, True, alpha, precision) if ta else matmul(dc, b, False, not tb, alpha, precision)
    if ctx.needs_input_grad[1]:
        # nn/tn: dB = op(A)^T dC;  nt/tt: dB = (op(A)^T dC)^T = dC^T op(A)
        db = matmul(dc, a, True, ta, alpha, precision) if tb else matmul(a, dc, not ta, False, alpha, precision)
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
    _check_kinds(a, b, out)
    batch, M, N, K = _out_dims(a, b, out, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, beta, precision)
    opa, opb = _torch_product(a, b, trans_a, trans_b)
    if beta == 0:  # BLAS's rule: out's old values (NaN included) play no part
        torch.matmul(opa, opb, out=out)
        if alpha != 1:
            out.mul_(alpha)
    else:
        out.mul_(beta).add_(torch.matmul(opa, opb), alpha=alpha)


@matmul_out.register_kernel("cuda")
def _matmul_out_cuda(a, b, out, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, precision="highest"):
    _check_kinds(a, b, out)
    batch, M, N, K = _out_dims(a, b, out, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, beta, precision)
    if M == 0 or N == 0:
        return
    if K == 0:
        out.mul_(beta) if beta != 0 else out.zero_()
        return
    _autotune_matmul(a, b, out, alpha, beta, trans_a=trans_a, trans_b=trans_b, precision=precision)


@matmul_out.register_fake
def _matmul_out_fake(a, b, out, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, precision="highest"):
    _check_kinds(a, b, out)
    _out_dims(a, b, out, trans_a, trans_b)


def _out_dims(a: Tensor, b: Tensor, out: Tensor, trans_a: bool, trans_b: bool):
    batch, M, N, K = _dims(a, b, trans_a, trans_b)
    want = _shape(batch, M, N)
    torch._check(
        out.dim() == len(want) and all(o == w for o, w in zip(out.shape, want, strict=True)),
        lambda: f"out is {tuple(out.shape)}, the product is {tuple(want)}",
    )
    return batch, M, N, K
