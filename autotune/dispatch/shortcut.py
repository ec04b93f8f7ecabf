"""The short road of `matmul` for two CuPy arrays or two torch tensors seen before: a cached launch.

A call with the same array types, shapes, strides, dtypes, devices, grad flags, 16-byte
alignment, transposes and tier as one that the full road served without a copy runs the same
kernel at the same pitches (and batch strides): the full road's checks and placement gave the
same answer then.
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
    """Return what decides the full road's answer for a new output (A and B both CuPy, or torch)."""
    # The pointers' alignment is in it (a misaligned operand may be copied, or read another way);
    # torch's grad flags too, so a tensor that requires grad keeps meeting the full road's refusal.
    if type(A) is _ndarray():
        a, b = A.data, B.data
        return (
            type(A), type(B), A.shape, A.strides, B.shape, B.strides, A.dtype, B.dtype,
            a.device_id, b.device_id, a.ptr & 15, b.ptr & 15, trans_a, trans_b, precision, dev,
        )  # fmt: skip
    return (
        type(A), type(B), A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, A.device, B.device,
        A.requires_grad, B.requires_grad, A.data_ptr() & 15, B.data_ptr() & 15, trans_a, trans_b, precision, dev,
    )  # fmt: skip


class _NoCupy:
    """What no array is: CuPy's array type before CuPy is imported (tests of the key on torch)."""


def _ndarray() -> type:
    cupy = sys.modules.get("cupy")
    return _NoCupy if cupy is None else cupy.ndarray


class Shortcut:
    """One cached launch: a new output of the call's shape, then the kernel on A's and B's memory.

    A batch is one launch of every matrix at the full road's batch strides.
    """

    __slots__ = ("K", "M", "N", "batch", "launch", "pitches", "shape", "strides")

    def __init__(self, kernel, ops):
        self.M, self.N, self.K, self.pitches = ops.M, ops.N, ops.K, ops.pitches
        self.batch, self.strides, self.shape = ops.batch, ops.strides, tuple(ops.result.shape)
        self.launch = kernel._kernel.launch

    def _run(self, a: int, b: int, c: int, alpha: float, stream) -> None:
        self.launch(self.M, self.N, self.K, a, b, c, alpha, 0.0, stream, self.pitches, self.batch, self.strides)


class TorchShortcut(Shortcut):
    """A Shortcut for torch tensors: the output torch's, on torch's current stream."""

    __slots__ = ("empty", "f32", "stream")

    def __init__(self, kernel, ops):
        import torch

        from .interop import torch_current_stream

        super().__init__(kernel, ops)
        self.empty, self.f32, self.stream = torch.empty, torch.float32, torch_current_stream

    def __call__(self, A, B, alpha: float):
        """Return alpha * op(A) @ op(B) in a new tensor, queued on torch's current stream."""
        out = self.empty(self.shape, dtype=self.f32, device=A.device)
        self._run(A.data_ptr(), B.data_ptr(), out.data_ptr(), alpha, self.stream(A.device))
        return out


class CupyShortcut(Shortcut):
    """A Shortcut for CuPy arrays: the output from CuPy's pool, on CuPy's current stream."""

    __slots__ = ("cp",)

    def __init__(self, kernel, ops):
        import cupy

        super().__init__(kernel, ops)
        self.cp = cupy

    def __call__(self, A, B, alpha: float):
        """Return alpha * op(A) @ op(B) in a new cupy.ndarray, queued on CuPy's current stream."""
        cp = self.cp
        out = cp.empty(self.shape, dtype=cp.float32)
        self._run(A.data.ptr, B.data.ptr, out.data.ptr, alpha, cp.cuda.get_current_stream())
        return out


def fits(A, B, ops, kernel=None) -> bool:
    """Whether the full road's operands are A, B and a new row-major output, in place and whole.

    Both operands of one kind (CuPy or torch), and `kernel` one launch (the Ozaki route,
    dispatch/routes.Routed, is a check and its stages). A batch fits as one matrix does.
    """
    # Anything else (a copy, a swap for a column-major C, an empty product) stays on the full
    # road every time.
    cupy_kind = type(A) is _ndarray()
    if getattr(kernel, "routed", False) or ops.wrap is not None or min(ops.M, ops.N, ops.K) <= 0:
        return False
    if cupy_kind != (type(B) is _ndarray()):
        return False
    c = ops.result
    if cupy_kind:
        ptrs, whole = (A.data.ptr, B.data.ptr, c.data.ptr), c.flags.c_contiguous
    else:
        ptrs, whole = (A.data_ptr(), B.data_ptr(), c.data_ptr()), c.is_contiguous()
    count = 1
    for n in c.shape[:-2]:
        count *= n
    return (
        whole
        and (ops.a.data.ptr, ops.b.data.ptr, ops.c.data.ptr) == ptrs
        and tuple(c.shape[-2:]) == (ops.M, ops.N)
        and count == ops.batch
        and (ops.batch == 1 or ops.strides[2] == ops.M * ops.N)
    )


def made(A, kernel, ops) -> Shortcut:
    """Return the shortcut of a call that `fits`: for a CuPy A a CupyShortcut, else torch's."""
    return CupyShortcut(kernel, ops) if type(A) is _ndarray() else TorchShortcut(kernel, ops)


def remember(table, k: tuple, shortcut: Shortcut) -> None:
    """Keep `shortcut` for key `k` in `table` (a results table), dropping the oldest past _MAX."""
    cuts = table.shortcuts
    if len(cuts) >= _MAX:
        del cuts[next(iter(cuts))]
    cuts[k] = shortcut
