"""The measures the runner's `_contract` checks the tensor-core tiers' accuracy with.

Inputs of each kind, operands rounded to TF32 as the kernels round them, the two error measures,
and cuBLAS's gemm with TF32 products (the bar of a tier held to TF32, `core.tiers`).
"""

from __future__ import annotations

import contextlib
import math

import cupy as cp


@contextlib.contextmanager
def math_mode(tf32: bool):
    """Run cuBLAS's FP32 gemm inside with TF32 tensor-core products (`tf32`), else unchanged."""
    if not tf32:
        yield
        return
    from cupy_backends.cuda.libs import cublas

    handle = cp.cuda.device.get_cublas_handle()
    mode = cublas.getMathMode(handle)
    # CUBLAS_TF32_TENSOR_OP_MATH (cublas_api.h); not every CuPy names it.
    cublas.setMathMode(handle, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
    try:
        yield
    finally:
        cublas.setMathMode(handle, mode)


def contract_input(rng, kind: str, shape) -> cp.ndarray:
    """Return random FP32 operands of `kind`: "uniform" in [-1, 1), "normal", or "wide"."""
    if kind == "uniform":
        x = rng.random(shape, dtype=cp.float32) * 2 - 1
    elif kind == "normal":
        x = rng.standard_normal(shape, dtype=cp.float32)
    else:  # "wide": 2^U(-20, 20) with a random sign
        sign = cp.where(rng.random(shape, dtype=cp.float32) < 0.5, -1.0, 1.0)
        x = sign * cp.exp2(rng.random(shape, dtype=cp.float64) * 40 - 20)
    return x.astype(cp.float32)


def tf32_rounded(x) -> cp.ndarray:
    """Return finite `x` rounded to TF32 (10 mantissa bits) as the kernels' cvt.rna rounds it."""
    # To nearest, ties away from zero.
    bits = x.view(cp.uint32)
    return ((bits + cp.uint32(0x1000)) & cp.uint32(0xFFFFE000)).view(cp.float32)


def contract_errors(out, ref, scale) -> tuple[float, float]:
    """Return (max |out - ref| / max |ref|, median |out - ref| / scale); inf for an inf or NaN."""
    # None of the contract's inputs has an infinity or NaN: a result with one is wrong.
    if bool(cp.isnan(out).any()) or bool(cp.isinf(out).any()):
        return math.inf, math.inf
    diff = cp.abs(out.astype(cp.float64) - ref)
    top = float(cp.abs(ref).max())
    return float(diff.max()) / (top if top > 0 else 1.0), float(cp.median(diff / scale))
