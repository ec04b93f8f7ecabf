"""Ozaki scheme II on the device (gpu/ozaki.py): each stage's time and the whole beside cuBLAS SGEMM.

Per size and number of moduli: the scaling of A and of B (and its exponents alone), the n INT8
GEMMs (and the INT8 rate they reach on each of --kernels side by side: the pipelined, reference,
wgmma and wgmma_tma kernels), the reconstruction, and the whole call (on the first of --kernels),
each the median of CUDA-event timings, as FP32 TFLOP/s (2 M N K / time) and as shares of the
whole; cuBLAS SGEMM (CuPy's matmul, TF32 off) in the same process, and the max relative error of
both against a float64 product of a corner of C.

    PYTHONPATH=. python benchmarks/ozaki_gpu.py [--sizes 4096 8192] [--moduli 6 7 8] [--reps 10]
        [--kernels fast reference wgmma wgmma_tma]
"""

from __future__ import annotations

import argparse
import os
import statistics

import cupy as cp
import numpy as np

from autotune.gpu.ozaki import KERNELS, OzakiGemm


def _time(fn, reps: int) -> float:
    """Return the median seconds of `fn()` over `reps` runs after one warm-up, by CUDA events."""
    fn()
    times = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


def _corner_error(c: cp.ndarray, a: cp.ndarray, b: cp.ndarray, rows: int = 256) -> float:
    """Return max |C - C64| / max |C64| over C's first `rows` rows (float64 on the host)."""
    a64, b64 = cp.asnumpy(a[:rows]).astype(np.float64), cp.asnumpy(b).astype(np.float64)
    want = a64 @ b64
    return float(np.abs(cp.asnumpy(c[:rows]) - want).max() / np.abs(want).max())


def _one(size: int, n: int, reps: int, a: cp.ndarray, b: cp.ndarray, kernels: list[str]) -> None:
    """Print one size's and count's line: the whole on the first of `kernels`, each one's INT8 rate."""
    engines = {k: OzakiGemm(n, kernel=k) for k in kernels}
    eng = engines[kernels[0]]
    flop = 2.0 * size**3
    ra, rb = eng.scale(a, 0), eng.scale(b, 1)
    p = eng.products(ra, rb)
    for k, other in engines.items():  # every kernel's products are the same integers
        if k != kernels[0] and not bool((other.products(ra, rb) == p).all()):
            raise SystemExit(f"the {k} kernel's INT8 products differ from the {kernels[0]} kernel's")
    c = cp.empty((size, size), cp.float32)
    gemms = {k: _time(lambda e=e: e.products(ra, rb), reps) for k, e in engines.items()}
    stages = {
        "scale A": _time(lambda: eng.scale(a, 0), reps),
        "scale B": _time(lambda: eng.scale(b, 1), reps),
        "INT8 GEMMs": gemms[kernels[0]],
        "CRT": _time(lambda: eng.reconstruct(p, ra.e, rb.e, c), reps),
    }
    whole = _time(lambda: eng(a, b, c=c), reps)
    sgemm = _time(lambda: cp.matmul(a, b), reps)
    shares = ", ".join(f"{k} {t * 1e3:.2f} ms ({100 * t / whole:.0f}%)" for k, t in stages.items())
    exps = [_time(lambda x=x, ax=ax: eng.exponents(x, ax), reps) for x, ax in ((a, 0), (b, 1))]
    shares += f"; of the scaling, exponents A {exps[0] * 1e3:.2f} ms, B {exps[1] * 1e3:.2f} ms"
    int8 = ", ".join(f"{k} {n * flop / t / 1e12:.0f}" for k, t in gemms.items())
    err, err32 = _corner_error(eng(a, b), a, b), _corner_error(cp.matmul(a, b), a, b)
    print(
        f"{size}^3, {n} moduli, {kernels[0]} kernel: {flop / whole / 1e12:.1f} TFLOP/s ({whole * 1e3:.2f} ms), "
        f"SGEMM {flop / sgemm / 1e12:.1f} TFLOP/s: {sgemm / whole:.2f}x; INT8 TOPS {int8}; "
        f"max rel err {err:.2e} (SGEMM {err32:.2e})\n    {shares}"
    )


def main() -> None:
    """Print a line per size and number of moduli."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192], help="M = N = K")
    p.add_argument("--moduli", type=int, nargs="+", default=[6, 7, 8])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernels", nargs="+", default=["fast", "reference"], choices=list(KERNELS), help="INT8 kernels")
    args = p.parse_args()
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise SystemExit("CUPY_TF32 is set: cuBLAS would not run SGEMM")
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; uniform [-1, 1) operands")
    rng = cp.random.default_rng(args.seed)
    for size in args.sizes:
        a = rng.random((size, size), dtype=cp.float32) * 2 - 1
        b = rng.random((size, size), dtype=cp.float32) * 2 - 1
        for n in args.moduli:
            _one(size, n, args.reps, a, b, args.kernels)
            cp.get_default_memory_pool().free_all_blocks()  # the last count's planes


if __name__ == "__main__":
    main()
