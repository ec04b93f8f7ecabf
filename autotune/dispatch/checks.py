"""The checks of a call's arrays: float32, on the current device, shapes that chain."""

from __future__ import annotations

import cupy as cp
import numpy as np

_F32 = np.dtype(np.float32)


def check(A: cp.ndarray, B: cp.ndarray, out: cp.ndarray | None, device: int) -> tuple[int, int, int]:
    """Return (M, K, N) of float32 2-D operands on `device` that chain, and `out` of their shape."""
    _check_array("A", A, device)
    _check_array("B", B, device)
    if out is not None:
        _check_array("out", out, device)
    (M, K), (K2, N) = A.shape, B.shape
    if K != K2:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not chain (A is MxK, B is KxN)")
    if min(M, N, K) < 1:
        raise ValueError(f"empty operand: M={M}, N={N}, K={K}")
    if out is not None and out.shape != (M, N):
        raise ValueError(f"out must have shape {(M, N)}, got {out.shape}")
    return M, K, N


def check_batched(A: cp.ndarray, B: cp.ndarray, out: cp.ndarray | None, device: int):
    """Return (batch shape, (M, K, N)) of float32 batches of matrices that chain and broadcast.

    The matrices are the last two axes; the batch shapes broadcast as `cupy.matmul`'s do.
    """
    _check_array("A", A, device, batch=True)
    _check_array("B", B, device, batch=True)
    if out is not None:
        _check_array("out", out, device, batch=True)
    (M, K), (K2, N) = A.shape[-2:], B.shape[-2:]
    if K != K2:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not chain (A is ...xMxK, B is ...xKxN)")
    try:
        lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except ValueError:
        raise ValueError(f"batch shapes {A.shape[:-2]} and {B.shape[:-2]} do not broadcast") from None
    if min(M, N, K) < 1 or 0 in lead:
        raise ValueError(f"empty operand: batch {lead}, M={M}, N={N}, K={K}")
    if out is not None and out.shape != (*lead, M, N):
        raise ValueError(f"out must have shape {(*lead, M, N)}, got {out.shape}")
    return tuple(lead), (M, K, N)


def _check_array(name: str, x: cp.ndarray, device: int, batch: bool = False) -> None:
    """Check that `x` is float32, a matrix (a batch of them, with `batch`), on `device`."""
    dtype = x.dtype
    if dtype is not _F32 and dtype != _F32:  # identity first: the usual case, and cheaper
        raise TypeError(f"{name} must be float32 (strict FP32 SGEMM), got {dtype}")
    if x.ndim < 2 or (x.ndim > 2 and not batch):
        raise ValueError(f"{name} must be 2-D (or a batch of matrices, with more), got shape {x.shape}")
    if x.data.device_id != device:
        raise ValueError(f"{name} is on device {x.data.device_id}, the current device is {device}")


def _new_output(M: int, N: int, beta: float) -> cp.ndarray:
    """Return a new M x N CuPy output (beta must be 0: there is no C to scale)."""
    if beta != 0:
        raise ValueError("beta != 0 needs an `out` array holding C")
    return cp.empty((M, N), dtype=cp.float32)
