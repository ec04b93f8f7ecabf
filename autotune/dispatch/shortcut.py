"""The short road of `matmul` for two 2-D torch tensors seen before: a cached launch.

A call with the same tensor types, shapes, strides, dtypes, devices, grad flags, 16-byte
alignment, transposes and tier as one that the full road served without a copy runs the same
kernel at the same pitches: the full road's checks and placement gave the same answer then.
"""

from __future__ import annotations

import sys

_MAX = 4096  # keys remembered per results table; the oldest goes first


def torch_types() -> tuple[type, ...]:
    """Return the tensor types the short road takes: none until torch is imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    return (torch.Tensor, torch.nn.Parameter)


def compiling() -> bool:
    """Whether torch.compile is tracing the call (torch imported: a torch tensor was passed)."""
    return sys.modules["torch"].compiler.is_compiling()


def key(A, B, trans_a: bool, trans_b: bool, precision: str, dev: int) -> tuple:
    """Return what decides the full road's answer for a new output, A and B being torch tensors."""
    # The pointers' alignment is in it (a misaligned operand may be copied, or read another way);
    # the grad flags too, so a tensor that requires grad keeps meeting the full road's refusal.
    return (
        type(A),
        type(B),
        A.shape,
        A.stride(),
        B.shape,
        B.stride(),
        A.dtype,
        B.dtype,
        A.device,
        B.device,
        A.requires_grad,
        B.requires_grad,
        A.data_ptr() & 15,
        B.data_ptr() & 15,
        trans_a,
        trans_b,
        precision,
        dev,
    )


class Shortcut:
    """One cached launch: a new M x N output, then the kernel on A's and B's own memory."""

    __slots__ = ("M", "N", "K", "empty", "f32", "launch", "pitches", "stream")

    def __init__(self, kernel, ops):
        import torch

        from .interop import torch_current_stream

        self.M, self.N, self.K, self.pitches = ops.M, ops.N, ops.K, ops.pitches
        self.launch = kernel._kernel.launch
        self.empty, self.f32, self.stream = torch.empty, torch.float32, torch_current_stream

    def __call__(self, A, B, alpha: float):
        """Return alpha * op(A) @ op(B) in a new tensor, queued on torch's current stream."""
        out = self.empty((self.M, self.N), dtype=self.f32, device=A.device)
        a, b, c = A.data_ptr(), B.data_ptr(), out.data_ptr()
        self.launch(self.M, self.N, self.K, a, b, c, alpha, 0.0, self.stream(A.device), self.pitches)
        return out


def fits(A, B, ops, kernel=None) -> bool:
    """Whether the full road's operands are A, B and a new row-major output, in place and whole.

    And `kernel` one launch (the Ozaki route, dispatch/routes.Routed, is a check and its stages).
    """
    # Anything else (a copy, a batch, a swap for a column-major C, an empty product) stays on the
    # full road every time.
    c = ops.result
    return (
        not getattr(kernel, "routed", False)
        and ops.batch == 1
        and ops.wrap is None
        and min(ops.M, ops.N, ops.K) > 0
        and ops.a.data.ptr == A.data_ptr()
        and ops.b.data.ptr == B.data_ptr()
        and ops.c.data.ptr == c.data_ptr()
        and tuple(c.shape) == (ops.M, ops.N)
        and c.is_contiguous()
    )


def remember(table, k: tuple, shortcut: Shortcut) -> None:
    """Keep `shortcut` for key `k` in `table` (a results table), dropping the oldest past _MAX."""
    cuts = table.shortcuts
    if len(cuts) >= _MAX:
        del cuts[next(iter(cuts))]
    cuts[k] = shortcut
