"""The products that the custom operators (op.py) and the eager road (fast.py) share.

The checks, the CPU's torch product, the CUDA call of autotune.matmul, the gradient formulas.

Nothing here registers anything with torch; each function takes plain tensors and returns what
the operator's contract says (a new contiguous tensor, or `out` written).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..dispatch.api import cached_product
from ..dispatch.api import matmul as _autotune_matmul
from . import native

_CPU_DTYPES = (torch.float32, torch.float64)

# Callbacks that the recorder (record.py) adds: each is told every product run, as
# (M, N, K, layout, batch, beta, precision). Empty unless a recording is under way: one truth test a call.
LISTENERS: list[Callable[..., None]] = []


def listen(listener: Callable[..., None], on: bool = True) -> None:
    """Add `listener` to LISTENERS (on) or remove it: while one listens, no C++ plan serves."""
    if on:
        LISTENERS.append(listener)
    else:
        LISTENERS.remove(listener)
    native.serving(not LISTENERS)


def _require(cond: bool, message: Callable[[], str]) -> None:
    """torch._check's contract for concrete sizes, without its cost (several us a call)."""
    if not cond:
        raise RuntimeError(message())


def dims(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool, check: Callable = _require):
    """(batch or None, M, N, K) of op(a) @ op(b), read from shapes only.

    Args:
        check: how a condition is asserted: the default for concrete sizes, torch._check for
            symbolic ones (the fake implementation: it records the condition, never specialises).
    """
    check(a.dim() in (2, 3) and b.dim() == a.dim(), lambda: _ndim_error(a, b))
    M, Ka = (a.shape[-1], a.shape[-2]) if trans_a else (a.shape[-2], a.shape[-1])
    Kb, N = (b.shape[-1], b.shape[-2]) if trans_b else (b.shape[-2], b.shape[-1])
    check(Ka == Kb, lambda: f"autotune.matmul: op(a) is {M} x {Ka} but op(b) is {Kb} x {N}")
    batch = None
    if a.dim() == 3:
        check(a.shape[0] == b.shape[0], lambda: f"batch counts differ: {a.shape[0]} and {b.shape[0]}")
        batch = a.shape[0]
    return batch, M, N, Ka


def out_dims(a: Tensor, b: Tensor, out: Tensor, trans_a: bool, trans_b: bool, check: Callable = _require):
    """dims(), with out's shape checked against the product's."""
    batch, M, N, K = dims(a, b, trans_a, trans_b, check)
    want = shape(batch, M, N)
    message = lambda: f"out is {tuple(out.shape)}, the product is {tuple(want)}"  # noqa: E731
    check(out.dim() == len(want), message)
    for o, w in zip(out.shape, want, strict=True):
        check(o == w, message)  # one size at a time: symbolic sizes are asserted, not guarded on
    return batch, M, N, K


def _ndim_error(a: Tensor, b: Tensor) -> str:
    return f"autotune.matmul takes two matrices or two batches of them, got {a.dim()}-D and {b.dim()}-D"


def check_kinds(a: Tensor, b: Tensor, out: Tensor | None = None) -> None:
    """A TypeError unless the operands share a device and a dtype this operator serves there."""
    dtype, device = a.dtype, a.device
    for name, x in (("b", b), ("out", out)):
        if x is not None and (x.dtype != dtype or x.device != device):
            raise TypeError(f"autotune.matmul: {name} is {x.dtype} on {x.device}, a is {dtype} on {device}")
    kind = device.type
    if kind == "cuda":
        if dtype != torch.float32:
            raise TypeError(
                f"autotune.matmul runs float32 only (strict FP32 SGEMM), got {dtype} on {device}: "
                "keep torch's own product (nn.Linear) for this layer, or cast it to float32 yourself"
            )
    elif kind == "cpu":
        if dtype not in _CPU_DTYPES:
            raise TypeError(f"autotune.matmul on the CPU takes float32 or float64, got {dtype}")
    elif kind != "meta":
        raise TypeError(f"autotune.matmul runs on CUDA (and on the CPU through torch), got a tensor on {device}")


def shape(batch, M, N) -> tuple:
    return (M, N) if batch is None else (batch, M, N)


def _note(a: Tensor, batch, M, N, K, trans_a: bool, trans_b: bool, beta: float, precision: str) -> None:
    """Tell the recorders of one product (float32 only: the others are no SGEMM to tune)."""
    if a.dtype == torch.float32:
        layout = "nt"[trans_a] + "nt"[trans_b]
        for listener in LISTENERS:
            listener(int(M), int(N), int(K), layout, int(batch or 1), float(beta), precision)


def _torch_operands(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool) -> tuple[Tensor, Tensor]:
    return (a.transpose(-2, -1) if trans_a else a), (b.transpose(-2, -1) if trans_b else b)


def cpu_product(a, b, trans_a=False, trans_b=False, alpha=1.0, precision="highest") -> Tensor:
    """alpha op(a) op(b) by torch on the CPU (every tier: torch's FP32 is strict there)."""
    check_kinds(a, b)
    batch, M, N, K = dims(a, b, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, 0.0, precision)
    c = a.new_empty(shape(batch, M, N))  # the layout the fake promises, whatever torch's mm would pick
    opa, opb = _torch_operands(a, b, trans_a, trans_b)
    torch.matmul(opa, opb, out=c)
    return c.mul_(alpha) if alpha != 1 else c


def cuda_product(a, b, trans_a=False, trans_b=False, alpha=1.0, precision="highest") -> Tensor:
    """Return alpha op(a) op(b) by autotune's tuned kernel, in a new contiguous tensor.

    The output is torch's (torch.empty on the current stream, so a CUDA graph's pool holds it
    under capture). A shape's first call chooses, compiles and checks its kernel and makes its
    workspace for the current stream: run it once on the capturing stream before a CUDA graph
    capture, so that the capture records launches only.
    """
    # A call whose plan is armed: from C++ (native.py), which reads pointers only, grad or not.
    if (served := native.product) is not None and not LISTENERS and (type(alpha) is float or type(alpha) is int):
        tier = native.TIERS.get(precision)
        if tier is not None and (c := served(a, b, trans_a, trans_b, tier, alpha)) is not None:
            return c
    # Autograd hands the kernel the caller's tensors, requires_grad and all; autotune.matmul
    # refuses those (it records no graph), and here the graph is the operator's own.
    a = a.detach() if a.requires_grad else a
    b = b.detach() if b.requires_grad else b
    if not LISTENERS and a.is_cuda:
        # A shape seen before: the cached launch, whose hit stands for the checks below (the
        # full road's are theirs and more). Only the launch's cost is left on the hot path.
        c = cached_product(a, b, alpha, trans_a, trans_b, precision)
        if c is not None:
            return c
        if not (_in_place(a) and _in_place(b)):  # the full road would copy on every call: the copy's is planned
            a, b = (x if _in_place(x) else x.contiguous() for x in (a, b))
            return cuda_product(a, b, trans_a, trans_b, alpha, precision)
        native.start()  # a new shape on a CUDA device: the C++ road's build begins, once
    check_kinds(a, b)
    batch, M, N, K = dims(a, b, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, 0.0, precision)
    if M == 0 or N == 0 or K == 0:  # no GEMM to launch; an empty K sums nothing
        return a.new_zeros(shape(batch, M, N))
    return _autotune_matmul(a, b, alpha=alpha, trans_a=trans_a, trans_b=trans_b, precision=precision)


def cpu_product_out(a, b, out, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, precision="highest") -> None:
    """out = alpha op(a) op(b) + beta out by torch on the CPU (out not read when beta is 0)."""
    check_kinds(a, b, out)
    batch, M, N, K = out_dims(a, b, out, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, beta, precision)
    opa, opb = _torch_operands(a, b, trans_a, trans_b)
    if beta == 0:  # BLAS's rule: out's old values (NaN included) play no part
        torch.matmul(opa, opb, out=out)
        if alpha != 1:
            out.mul_(alpha)
    else:
        out.mul_(beta).add_(torch.matmul(opa, opb), alpha=alpha)


def _in_place(x: Tensor) -> bool:
    """Whether the kernels read x in place: not a matrix, or one with a contiguous axis."""
    from ..dispatch.arrays import _as_stored  # the full road's own rule (CuPy: no import at start-up)

    return x.dim() != 2 or _as_stored(*x.shape, *(4 * s for s in x.stride())) is not None


# The product's function by device type: the eager road's (fast.py) and the operator's short
# Autograd kernel's (op.py) kernels.
PRODUCTS = {"cuda": cuda_product, "cpu": cpu_product}


def cuda_product_out(a, b, out, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, precision="highest") -> None:
    """out = alpha op(a) op(b) + beta out by autotune's tuned kernel."""
    check_kinds(a, b, out)
    batch, M, N, K = out_dims(a, b, out, trans_a, trans_b)
    if LISTENERS:
        _note(a, batch, M, N, K, trans_a, trans_b, beta, precision)
    if M == 0 or N == 0:
        return
    if K == 0:
        out.mul_(beta) if beta != 0 else out.zero_()
        return
    # As cuda_product: whether a graph is recorded is torch's autograd layer's to say, not autotune's.
    a = a.detach() if a.requires_grad else a
    b = b.detach() if b.requires_grad else b
    _autotune_matmul(a, b, out, alpha, beta, trans_a=trans_a, trans_b=trans_b, precision=precision)


def gradients(product: Callable, a, b, dc: Tensor, flags: tuple, needs: tuple[bool, bool]):
    """(dA, dB) of C = alpha op(A) op(B), each one call of `product` reading A, B and dC in place.

    d op(A) = alpha dC op(B)^T and d op(B) = alpha op(A)^T dC; a transposed operand's gradient
    is the transpose of that, written as the product with its factors swapped, so every case is
    one product with trans flags and no operand is copied.

    Args:
        product: (a, b, trans_a, trans_b, alpha, precision) -> Tensor: the operator, or the eager path.
        a, b: the inputs (only the one the other's gradient reads need be there).
        flags: (trans_a, trans_b, alpha, precision) of the forward call.
        needs: whether dA, dB are wanted (None in their place when not).
    """
    ta, tb, alpha, precision = flags
    da = db = None
    if needs[0]:
        # nn/nt: dA = dC op(B)^T;  tn/tt: dA = (dC op(B)^T)^T = op(B) dC^T
        da = product(b, dc, tb, True, alpha, precision) if ta else product(dc, b, False, not tb, alpha, precision)
    if needs[1]:
        # nn/tn: dB = op(A)^T dC;  nt/tt: dB = (op(A)^T dC)^T = dC^T op(A)
        db = product(dc, a, True, ta, alpha, precision) if tb else product(a, dc, not ta, False, alpha, precision)
    return da, db
