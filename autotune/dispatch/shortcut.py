"""The short road of `matmul` for CuPy arrays or torch tensors seen before: a cached launch.

A call with the same array types, shapes, strides, dtypes, devices, grad flags, 16-byte
alignment, transposes, tier and beta zero or not as one that the full road served without a
copy runs the same kernel at the same pitches (and batch strides): the full road's checks and
placement gave the same answer then. A call into an `out` goes it while `out`'s bytes lie apart
from A's and B's (the full road's overlap check, which depends on the addresses).
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


def key(A, B, out, beta, trans_a: bool, trans_b: bool, precision: str, dev: int) -> tuple:
    """Return what decides the full road's answer for A and B (both CuPy, or torch) and `out`."""
    # The pointers' alignment is in it (a misaligned operand may be copied, or read another way);
    # torch's grad flags too, so a tensor that requires grad keeps meeting the full road's refusal.
    # beta != 0 chooses another kernel (one that reads C).
    nd = _ndarray()
    return (*_form(A, nd), *_form(B, nd), _form(out, nd), beta != 0, trans_a, trans_b, precision, dev)


def _form(x, nd: type) -> tuple:
    """Return an array's type, shape, strides, dtype, device, grad flag and pointer mod 16.

    `nd` is CuPy's array type (_ndarray()), looked up once a key.
    """
    if x is None:
        return ()
    if type(x) is nd:
        data = x.data
        return type(x), x.shape, x.strides, x.dtype, data.device_id, data.ptr & 15
    return type(x), x.shape, x.stride(), x.dtype, x.device, x.requires_grad, x.data_ptr() & 15


class _NoCupy:
    """What no array is: CuPy's array type before CuPy is imported (tests of the key on torch)."""


def _ndarray() -> type:
    cupy = sys.modules.get("cupy")
    return _NoCupy if cupy is None else cupy.ndarray


class Shortcut:
    """One cached launch: the kernel on A's, B's and C's memory, C new or the call's `out`.

    A batch is one launch of every matrix at the full road's batch strides.
    """

    __slots__ = ("K", "M", "N", "batch", "bound", "launch", "pitches", "shape", "spans", "strides")

    def __init__(self, kernel, ops, spans=None):
        self.M, self.N, self.K, self.pitches = ops.M, ops.N, ops.K, ops.pitches
        self.batch, self.strides, self.shape = ops.batch, ops.strides, tuple(ops.result.shape)
        self.launch = kernel._kernel.launch
        # A launch with this shape's arguments worked out once (measure.CublasLaunch.bind), or None.
        bind = getattr(kernel._kernel, "bind", None)
        self.bound = None if bind is None else bind(self.M, self.N, self.K, self.pitches, self.batch, self.strides)
        # With an `out`: the byte extents of A, B and out from their pointers (their strides are
        # in the key), for the full road's overlap check in two compares an operand.
        self.spans = spans

    def _apart(self, a: int, b: int, c: int) -> bool:
        """Return whether C's bytes (at `c`) lie apart from A's (at `a`) and B's (at `b`)."""
        (a_lo, a_hi), (b_lo, b_hi), (c_lo, c_hi) = self.spans
        lo, hi = c + c_lo, c + c_hi
        return (hi <= a + a_lo or a + a_hi <= lo) and (hi <= b + b_lo or b + b_hi <= lo)

    def _run(self, a: int, b: int, c: int, alpha: float, beta: float, stream) -> None:
        if self.bound is not None:
            return self.bound(a, b, c, alpha, beta, stream)
        self.launch(self.M, self.N, self.K, a, b, c, alpha, beta, stream, self.pitches, self.batch, self.strides)


class TorchShortcut(Shortcut):
    """A Shortcut for torch tensors: a new output torch's, on torch's current stream."""

    __slots__ = ("stream",)

    def __init__(self, kernel, ops, spans=None):
        from .interop import torch_current_stream

        super().__init__(kernel, ops, spans)
        self.stream = torch_current_stream

    def __call__(self, A, B, alpha: float, out=None, beta: float = 0.0):
        """Return alpha * op(A) @ op(B) + beta * out, queued on torch's current stream, or None.

        None (nothing queued): `out` overlaps A or B, which the full road tells apart.
        """
        a, b = A.data_ptr(), B.data_ptr()
        if out is None:
            # A's dtype (float32: the key holds it) and device, at less host time than torch.empty's.
            out = A.new_empty(self.shape)
        elif not self._apart(a, b, out.data_ptr()):
            return None
        self._run(a, b, out.data_ptr(), alpha, beta, self.stream(A.device))
        return out


class CupyShortcut(Shortcut):
    """A Shortcut for CuPy arrays: a new output from CuPy's pool, on CuPy's current stream."""

    __slots__ = ("cp",)

    def __init__(self, kernel, ops, spans=None):
        import cupy

        super().__init__(kernel, ops, spans)
        self.cp = cupy

    def __call__(self, A, B, alpha: float, out=None, beta: float = 0.0):
        """Return alpha * op(A) @ op(B) + beta * out, queued on CuPy's current stream, or None.

        None (nothing queued): `out` overlaps A or B, which the full road tells apart.
        """
        cp = self.cp
        a, b = A.data.ptr, B.data.ptr
        if out is None:
            out = cp.empty(self.shape, dtype=cp.float32)
        elif not self._apart(a, b, out.data.ptr):
            return None
        self._run(a, b, out.data.ptr, alpha, beta, cp.cuda.get_current_stream())
        return out


def fits(A, B, ops, kernel=None, out=None) -> bool:
    """Whether the full road's operands are A, B and a row-major C (new, or `out`), in place, whole.

    All of one kind (CuPy or torch), and `kernel` one launch (the Ozaki route, dispatch/routes.Routed,
    is a check and its stages). A batch fits as one matrix does.
    """
    # Anything else (a copy, a swap for a column-major C, an empty product) stays on the full
    # road every time.
    cupy_kind = type(A) is _ndarray()
    if getattr(kernel, "routed", False) or ops.wrap is not None or min(ops.M, ops.N, ops.K) <= 0:
        return False
    if len(kinds := {_kind(x) for x in (A, B, out) if x is not None}) != 1 or None in kinds:
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


def _kind(x) -> str | None:
    """Return "cupy" or "torch" for an array the short road takes, else None."""
    if type(x) is _ndarray():
        return "cupy"
    return "torch" if type(x) in torch_types() else None


def made(A, B, out, kernel, ops) -> Shortcut:
    """Return the shortcut of a call that `fits`: for a CuPy A a CupyShortcut, else torch's."""
    cupy_kind = type(A) is _ndarray()
    if out is None:
        spans = None
    elif cupy_kind:
        spans = tuple(span(x.shape, x.strides, 4) for x in (A, B, out))
    else:
        spans = tuple(span(x.shape, tuple(4 * s for s in x.stride()), 4) for x in (A, B, out))
    return (CupyShortcut if cupy_kind else TorchShortcut)(kernel, ops, spans)


def span(shape, strides, itemsize: int) -> tuple[int, int]:
    """Return the byte offsets, from its pointer, of an array's first byte and past its last.

    Args:
        shape, strides: the array's, strides in bytes (any sign; 0 for a broadcast axis).
        itemsize: bytes an element.
    """
    # A loop: cheaper than sums.
    lo = hi = 0
    for n, s in zip(shape, strides, strict=True):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + itemsize


def remember(table, k: tuple, shortcut: Shortcut) -> None:
    """Keep `shortcut` for key `k` in `table` (a results table), dropping the oldest past _MAX."""
    cuts = table.shortcuts
    if len(cuts) >= _MAX:
        del cuts[next(iter(cuts))]
    cuts[k] = shortcut
