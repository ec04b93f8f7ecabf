"""The operands of `autotune.matmul` and of a loaded kernel: any CUDA array in, the same kind out.

Each operand is first a CuPy view over its memory (interop.py), then placed as the kernels read it:
in place whatever its strides where one of its two axes is contiguous (`_as_stored`), and a batch
of more than two dimensions as one strided batched launch (`_placed_batch`).
"""

from __future__ import annotations

import contextlib

import cupy as cp
import numpy as np
from cupy_backends.cuda.api import driver, runtime

from .checks import _F32, _new_output, check, check_batched
from .interop import adopt, new_output_like, torch_stream
from .shortcut import span

current_device = runtime.getDevice  # cheaper than cupy.cuda.Device().id, which builds an object


def bind_context() -> bool:
    """Make the current device's primary context current where this thread has none; say if it did.

    A thread that has made no CUDA runtime call has no current context, and the driver refuses the
    launches (CUDA_ERROR_INVALID_CONTEXT) and module loads the kernels make through it. torch's
    autograd engine runs a backward on such a thread: its device switch skips cudaSetDevice where
    cudaGetDevice already names the device. cudaSetDevice binds the primary context.
    """
    try:
        if driver.ctxGetCurrent() != 0:
            return False  # a context is current: what failed, failed for another reason
        runtime.setDevice(runtime.getDevice())
        return driver.ctxGetCurrent() != 0
    except Exception:  # noqa: BLE001 - no driver to ask: nothing bound, the caller's error stands
        return False


def no_device() -> str | None:
    """Return why CUDA has no device to run on (no GPU, no driver or one too old), else None."""
    try:
        count = runtime.getDeviceCount()
    except runtime.CUDARuntimeError as exc:
        return str(exc)
    return None if count > 0 else "CUDA reports no device"


NDARRAY = _NDARRAY = cp.ndarray  # the type the short road (shortcut.py) takes besides torch's


class Operands:
    """One call's operands as the kernels read them, with the device and stream to launch on.

    `a`, `b` and `c` are op(A), op(B) and C as CuPy views (`a` is M x K whichever way it is
    stored); (M, N, K) is the row-major problem, `layout` how it reads them ("nt": B is read as
    stored N x K, ...), `pitches` the row pitches (lda, ldb, ldc) in floats; `finish` returns what
    the call returns once its launches are queued.
    """

    __slots__ = (
        "K", "M", "N", "a", "b", "batch", "c", "device", "layout", "pitches", "result", "stream", "strides", "wrap",
    )  # fmt: skip

    def __init__(self, a, b, c, shape, layout, pitches, device, stream, result, wrap=None, batch=1, strides=None):
        self.a, self.b, self.c = a, b, c
        self.M, self.N, self.K = shape
        self.layout, self.pitches = layout, pitches
        self.device, self.stream, self.result, self.wrap = device, stream, result, wrap
        # batch > 1: a, b, c are (batch, rows, cols) views, their matrices strides[i] floats apart.
        self.batch, self.strides = batch, strides

    def as_layout(self, layout: str) -> Operands:
        """Return these operands stored in `layout`, an operand stored otherwise copied."""
        # A kernel built for one layout reads only that; the copies are made on the launch stream.
        if layout == self.layout:
            return self
        (lda, ldb, ldc), a, b = self.pitches, self.a, self.b
        sa, sb, sc = self.strides or (0, 0, 0)
        with self.stream:
            if layout[0] != self.layout[0]:
                a, lda, sa = _restored(a, layout[0], sa)
            if layout[1] != self.layout[1]:
                b, ldb, sb = _restored(b, layout[1], sb)
        return Operands(
            a,
            b,
            self.c,
            (self.M, self.N, self.K),
            layout,
            (lda, ldb, ldc),
            self.device,
            self.stream,
            self.result,
            self.wrap,
            self.batch,
            None if self.strides is None else (sa, sb, sc),
        )

    def finish(self):
        """Return the call's result: `out`, or the new output in the caller's kind."""
        if self.wrap is None:
            return self.result
        with self.stream:  # the consumer orders itself after this stream (CUDA array interface v3)
            return self.wrap(self.c)


def prepare(A, B, out, beta: float, trans_a: bool = False, trans_b: bool = False) -> Operands:
    """Return the checked operands of C = alpha * op(A) @ op(B) + beta * C (op(X) = X.T if trans_x).

    `out` is C; None makes a new array (then beta must be 0). More than two dimensions are a batch.
    """
    # Copies, workspaces and new outputs are made on the launch stream (torch's current one for a
    # torch operand, else CuPy's), so nothing runs out of order with the caller's own work.
    if type(A) is _NDARRAY and type(B) is _NDARRAY and (out is None or type(out) is _NDARRAY):
        if A.ndim == B.ndim == 2:
            dev = current_device()
            a, b = (A.T if trans_a else A), (B.T if trans_b else B)
            M, K, N = check(a, b, out, dev)
            c = out if out is not None else _new_output(M, N, beta)
            return _placed(a, b, c, (M, N, K), dev, cp.cuda.get_current_stream(), c)
        if (ops := _plain_batch(A, B, out, beta, trans_a, trans_b)) is not None:
            return ops
    stream = torch_stream((("A", A), ("B", B), ("out", out)))
    if stream is None:
        return _adopted(A, B, out, beta, None, trans_a, trans_b)
    with stream:  # CuPy's current stream while the views, copies and output are made
        return _adopted(A, B, out, beta, stream, trans_a, trans_b)


def _adopted(A, B, out, beta: float, stream: cp.cuda.Stream | None, trans_a: bool, trans_b: bool) -> Operands:
    """Return the operands as CuPy arrays, checked and placed (`stream` None: CuPy's current)."""
    a, b = adopt("A", A), adopt("B", B)
    a, b = (a.swapaxes(-1, -2) if trans_a else a), (b.swapaxes(-1, -2) if trans_b else b)
    c = None if out is None else adopt("out", out)
    dev = current_device()
    stream = stream if stream is not None else cp.cuda.get_current_stream()
    if a.ndim == b.ndim == 2:
        M, K, N = check(a, b, c, dev)
        lead = ()
    else:
        lead, (M, K, N) = check_batched(a, b, c, dev)
    result, wrap = out, None
    if out is None:
        result, c, wrap = new_output_like(A, (*lead, M, N), beta)
    if lead:
        return _placed_batch(a, b, c, lead, (M, N, K), dev, stream, result, wrap)
    return _placed(a, b, c, (M, N, K), dev, stream, result, wrap)


def _placed_batch(a, b, c, lead, shape, dev, stream, result, wrap) -> Operands:
    """Return `_placed` for a batch: each operand a (batch, rows, cols) view, one stride apart."""
    # Arrays of more than two dimensions are batches of matrices (the last two axes), broadcast
    # against each other as `cupy.matmul` does: one strided batched launch, the matrices of each
    # operand one stride apart (0 for a 2-D operand, or a broadcast axis, shared by every matrix).
    # An input whose batch axes are not one stride apart (a slice with a step across them) is
    # copied; such an `out` is an error. Each matrix is placed as `_placed` places one.
    M, N, K = shape
    c_extent = _extent(c)
    _check_apart(c, c_extent, a, "A")
    _check_apart(c, c_extent, b, "B")
    count = int(np.prod(lead))
    c, sc = _one_stride(c, count)
    if c is None:
        raise ValueError("out's batch axes must be one stride apart (a reshape of them would need a copy)")
    with stream:
        a, sa = _batch_of(a, lead, count)
        b, sb = _batch_of(b, lead, count)
    placed = _as_stored(M, N, *c.strides[1:])
    if placed is None:
        raise ValueError(f"out's matrices must have a contiguous axis (strides {c.strides[1:]} in bytes)")
    kind, ldc = placed
    if kind == "t":  # column-major matrices: C^T = op(B)^T op(A)^T, row-major
        c, a, b, sa, sb, M, N = c.swapaxes(1, 2), b.swapaxes(1, 2), a.swapaxes(1, 2), sb, sa, N, M
    if count > 1 and not _apart(((count, sc), (M, ldc), (N, 1))):
        raise ValueError("out's matrices overlap each other: each result would overwrite another")
    with stream:
        a, ta, lda, sa = _stored_batch(a, sa)
        b, tb, ldb, sb = _stored_batch(b, sb)
    return Operands(a, b, c, (M, N, K), ta + tb, (lda, ldb, ldc), dev, stream, result, wrap, count, (sa, sb, sc))


def _plain_batch(A, B, out, beta: float, trans_a: bool, trans_b: bool) -> Operands | None:
    """Return `_placed_batch`'s operands for the usual CuPy batch, or None for the full placement.

    The usual batch: 3-D (or one 2-D, shared) float32 operands on this device, a batch of at least
    two, each matrix with a contiguous axis, a new or row-major `out` apart from them; anything
    else (and every error) goes the full way.
    """
    # The same answer as _adopted and _placed_batch give these operands, at a few microseconds of
    # host time rather than some sixty (broadcasts, views and checks of the general placement),
    # which is most of a small batch's call.
    if not (2 <= A.ndim <= 3 and 2 <= B.ndim <= 3 and (out is None or out.ndim == 3)):
        return None
    dev = current_device()
    a, b = (A.swapaxes(-1, -2) if trans_a else A), (B.swapaxes(-1, -2) if trans_b else B)
    for x in (a, b, out):
        if x is not None and (x.dtype is not _F32 or x.data.device_id != dev):
            return None
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    na, nb = (a.shape[0] if a.ndim == 3 else 1), (b.shape[0] if b.ndim == 3 else 1)
    count = max(na, nb)
    if K != K2 or min(M, N, K) < 1 or count < 2 or na not in (1, count) or nb not in (1, count):
        return None
    placed = [_plain_matrices(x, n, count) for x, n in ((a, na), (b, nb))]
    if None in placed or (out is None and beta != 0):
        return None
    (a, ta, lda, sa), (b, tb, ldb, sb) = placed
    if out is None:
        c = cp.empty((count, M, N), dtype=cp.float32)
        ldc, sc = N, M * N
    else:
        c = out
        if c.shape != (count, M, N):
            return None
        stored = _as_stored(M, N, *c.strides[1:])
        if stored is None or stored[0] != "n" or c.strides[0] % 4:
            return None
        ldc, sc = stored[1], c.strides[0] // 4
        extent = _extent(c)
        if not _apart(((count, sc), (M, ldc), (N, 1))) or _overlaps(c, extent, a) or _overlaps(c, extent, b):
            return None
    stream = cp.cuda.get_current_stream()
    return Operands(a, b, c, (M, N, K), ta + tb, (lda, ldb, ldc), dev, stream, c if out is None else out, None,
                    count, (sa, sb, sc))  # fmt: skip


def _plain_matrices(x: cp.ndarray, n: int, count: int) -> tuple[cp.ndarray, str, int, int] | None:
    """Return `_stored_batch` of an operand of `n` (1 or `count`) matrices, or None for a copy."""
    stored = _as_stored(*x.shape[-2:], *x.strides[-2:])
    if stored is None or (n > 1 and x.strides[0] % 4):
        return None
    if n > 1:
        return x, *stored, x.strides[0] // 4
    view = cp.lib.stride_tricks.as_strided(x, (count, *x.shape[-2:]), (0, *x.strides[-2:]))  # one, shared
    return view, *stored, 0


def _batch_of(x: cp.ndarray, lead: tuple[int, ...], count: int) -> tuple[cp.ndarray, int]:
    """Return an input broadcast to batch shape `lead`, a (count, rows, cols) view, and its stride.

    A contiguous copy when its batch axes are not one stride apart.
    """
    full = cp.broadcast_to(x, (*lead, *x.shape[-2:]))
    view, stride = _one_stride(full, count)
    if view is None:
        rows, cols = x.shape[-2:]
        return cp.ascontiguousarray(full).reshape(count, rows, cols), rows * cols
    return view, stride


def _one_stride(x: cp.ndarray, count: int) -> tuple[cp.ndarray | None, int | None]:
    """Return `x` (..., rows, cols) as a (count, rows, cols) view one stride apart, and that stride.

    The stride is in floats; (None, None) when the batch axes are not evenly spaced.
    """
    dims = [(n, s) for n, s in zip(x.shape[:-2], x.strides[:-2], strict=True) if n != 1]
    step = dims[-1][1] if dims else 0
    if any(s != n_in * s_in for (_, s), (n_in, s_in) in zip(dims, dims[1:], strict=False)) or step % 4:
        return None, None
    view = cp.lib.stride_tricks.as_strided(x, (count, *x.shape[-2:]), (step, *x.strides[-2:]))
    return view, step // 4


def _stored_batch(x: cp.ndarray, stride: int) -> tuple[cp.ndarray, str, int, int]:
    """Return `_stored` for a batch view and its stride: (view, layout, row pitch, stride)."""
    # A row-major copy where the matrices have no contiguous axis.
    stored = _as_stored(*x.shape[1:], *x.strides[1:])
    if stored is not None:
        return x, *stored, stride
    y, pitch, stride = _restored(x, "n", stride)
    return y, "n", pitch, stride


def _placed(a, b, c, shape, dev, stream, result, wrap=None) -> Operands:
    """Return the row-major problem that reads op(A) = a, op(B) = b and writes c in place."""
    # A row-major C as it is, a column-major C as C^T = op(B)^T op(A)^T = b^T a^T, row-major.
    M, N, K = shape
    c_extent = _extent(c)
    _check_apart(c, c_extent, a, "A")
    _check_apart(c, c_extent, b, "B")
    placed = _as_stored(M, N, *c.strides)
    if placed is None:
        raise ValueError(f"out must have a contiguous axis (strides {c.strides} in bytes)")
    kind, ldc = placed
    if kind == "t":  # a column-major C: C^T = b^T a^T, row-major
        a, b, M, N = b.T, a.T, N, M
    a, ta, lda = _stored(a, stream)
    b, tb, ldb = _stored(b, stream)
    return Operands(a, b, c, (M, N, K), ta + tb, (lda, ldb, ldc), dev, stream, result, wrap)


def _stored(x: cp.ndarray, stream=None) -> tuple[cp.ndarray, str, int]:
    """Return the (array, layout, row pitch) that the kernels read the operand `x` from.

    "n": `x` row-major as it is; "t": its transpose row-major; else a row-major copy of it, made on
    `stream` (the launch's).
    """
    stored = _as_stored(*x.shape, *x.strides)
    if stored is not None:
        return x, *stored
    with stream if stream is not None else contextlib.nullcontext():
        return cp.ascontiguousarray(x), "n", x.shape[1]


def _as_stored(rows: int, cols: int, s0: int, s1: int) -> tuple[str, int] | None:
    """Return how a rows x cols float32 matrix with byte strides (s0, s1) lies, or None.

    ("n", row pitch) when row-major, ("t", row pitch of its transpose) when column-major, None when
    neither axis is contiguous (pitches in floats). Operands and out alike.
    """
    # So operands are read in place whatever their strides, as long as one axis is contiguous: a
    # column-major one (a transpose, a Fortran-order array) as the transpose of a row-major one,
    # the other axis' stride as its leading dimension. Only an operand with neither axis
    # contiguous (a slice with a step, a broadcast) is copied.
    if s1 == 4 and (rows == 1 or (s0 % 4 == 0 and s0 >= 4 * cols)):
        return "n", (cols if rows == 1 else s0 // 4)
    if s0 == 4 and (cols == 1 or (s1 % 4 == 0 and s1 >= 4 * rows)):
        return "t", (rows if cols == 1 else s1 // 4)
    return None


def _restored(x: cp.ndarray, want: str, stride: int | None = None) -> tuple[cp.ndarray, int, int]:
    """Return `x` copied into layout `want`: (its view, row pitch, stride).

    `x` is rows x cols, or a batch of them `stride` floats apart; a broadcast matrix (stride 0) is
    copied once.
    """
    rows, cols = x.shape[-2:]
    if x.ndim == 3 and stride == 0:
        y, pitch, _ = _restored(x[0], want)
        return cp.lib.stride_tricks.as_strided(y, x.shape, (0, *y.strides)), pitch, 0
    if want == "t":
        return cp.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2), rows, rows * cols
    return cp.ascontiguousarray(x), cols, rows * cols


def _apart(dims) -> bool:
    """Return whether each stride of `dims` ((n, stride) pairs) passes the smaller ones' span."""
    # That makes the elements sum(i_d * stride_d), 0 <= i_d < n_d, all distinct: stacked and
    # interleaved matrices pass; exotic layouts that are distinct too are refused.
    span = 0
    for stride, n in sorted((abs(s), n) for n, s in dims if n > 1):
        if stride <= span:
            return False
        span += (n - 1) * stride
    return True


def _check_apart(c: cp.ndarray, c_extent: tuple[int, int], x: cp.ndarray, name: str) -> None:
    """Raise ValueError where `out` shares memory with an operand (read while C is written)."""
    # Arrays whose extents overlap (slices of one buffer side by side, interleaved heads) are
    # checked element by element: NumPy solves it from the addresses and strides alone.
    if _overlaps(c, c_extent, x):
        raise ValueError(f"out overlaps {name}: the result would overwrite an operand while it is read")


def _overlaps(c: cp.ndarray, c_extent: tuple[int, int], x: cp.ndarray) -> bool:
    """Return whether `out` (c, whose extent is `c_extent`) shares an element's memory with `x`."""
    lo, hi = c_extent
    xlo, xhi = _extent(x)
    return lo < xhi and xlo < hi and bool(np.shares_memory(_Addresses(c).array(), _Addresses(x).array()))


class _Addresses:
    """A device array's addresses as a NumPy array interface, for NumPy's overlap test.

    NumPy computes with the addresses and never reads the memory.
    """

    def __init__(self, x: cp.ndarray):
        self.__array_interface__ = {
            "shape": x.shape, "typestr": x.dtype.str, "data": (x.data.ptr, True), "strides": x.strides, "version": 3,
        }  # fmt: skip

    def array(self) -> np.ndarray:
        """Return the NumPy array over these addresses."""
        return np.asarray(self)


def _extent(x: cp.ndarray) -> tuple[int, int]:
    """Return [first byte, past the last byte] of an array's elements."""
    lo, hi = span(x.shape, x.strides, x.itemsize)
    ptr = x.data.ptr
    return ptr + lo, ptr + hi
