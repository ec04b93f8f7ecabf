"""What each precision tier's kernel makes of FP32 denormal (subnormal) inputs, against cuBLAS
FP32 and TF32 on the same data: printed, for the notes.

    python benchmarks/denormals.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import cupy as cp
    import numpy as np
    from cupy import cublas

    import autotune
    from autotune.core.types import Problem
    from autotune.gpu.precision import math_mode
    from autotune.kernels.space import Space

    sp = Space.load("mma_tf32")
    m, n, k = 64, 64, 64
    # Made on the host: CuPy's own elementwise kernels flush subnormals to zero.
    sub = cp.asarray(np.full((m, k), 3e-39, np.float32))  # subnormal: below 2^-126 = 1.18e-38
    ones = cp.asarray(np.ones((k, n), np.float32))
    tiny = cp.asarray(np.full((m, k), 1e-20, np.float32))
    cases = {
        "subnormal A (3e-39) x 1": (sub, ones),
        "1e-20 x 1e-20 (products 1e-40, subnormal)": (tiny, cp.asarray(np.full((k, n), 1e-20, np.float32))),
    }
    for name, (x, y) in cases.items():
        exact = float(x[0, 0]) * float(y[0, 0]) * k
        row = [f"{name}: exact {exact:.4g}", f"cuBLAS FP32 {float((x @ y)[0, 0]):.4g}"]
        out = cp.empty((m, n), cp.float32)
        with math_mode(tf32=True):
            cublas.gemm("N", "N", x, y, out=out)
        row.append(f"cuBLAS TF32 {float(out[0, 0]):.4g}")
        for tier in ("high", "medium"):
            kern = autotune.load(config=sp.family.built_for(sp.fallback, Problem(8, 8, 8, precision=tier)))
            row.append(f"{tier} {float(kern(x, y)[0, 0]):.4g}")
        print("; ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
