"""Ozaki scheme II on the device: moduli against the contract's errors and speed, per input kind.

At each size (M = N = K) and for each input kind of kernels/ozaki_choice.py (uniform, wide,
cancelling, row-scaled, denormal, small-integer, ...): the max (normwise) and median (against
|A||B|) relative errors against a float64 product on the device, of cuBLAS SGEMM (CuPy's matmul,
TF32 off), of autotune.matmul's 3xTF32 tier (precision "high": the stored or predicted kernel of
this GPU) and of gpu/ozaki.py with each number of moduli; and each one's time on the uniform
operands (the median of CUDA-event timings of the whole call), as a multiple of SGEMM's. The number
of moduli the per-call check (gpu/ozaki_guard.py's admit, on the device arrays) admits is printed
beside it, with its median wall time of 5 (its norms made in it: a call takes them from its scaling).
The float64 reference is made from a host copy of the operands: CuPy's own kernels flush FP32
subnormals, which would make the "denormal" kind's reference 0.

    PYTHONPATH=. python benchmarks/ozaki_curve_gpu.py [--sizes 4096 8192] [--moduli 5 6 7 8 9]
        [--kinds uniform wide ...] [--seed 0] [--reps 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CUPY_TF32", "0")

import cupy as cp
import numpy as np
from ozaki_gpu import _time

import autotune
from autotune.core.types import UserError
from autotune.gpu.ozaki import OzakiGemm
from autotune.gpu.ozaki_guard import admit
from autotune.kernels.ozaki_choice import KINDS, errors, operands


def _methods(moduli: list[int]) -> dict:
    """Return the products compared, by name: a function of the device operands each."""
    out = {"SGEMM": cp.matmul, "3xTF32": lambda a, b: autotune.matmul(a, b, precision="high")}
    for n in moduli:
        out[f"{n} moduli"] = OzakiGemm(n)
    return out


def main() -> None:
    """Print a table per size: a row per input kind, errors per method; then each method's speed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096])
    p.add_argument("--moduli", type=int, nargs="+", default=[5, 6, 7, 8, 9])
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    if os.environ["CUPY_TF32"] != "0":
        raise SystemExit("CUPY_TF32 is set: cuBLAS would not run SGEMM")
    methods = _methods(args.moduli)
    print(
        f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; errors: max |C - C64| / max |C64| "
        "and median |C - C64| / (|A||B|), against a float64 product on the device"
    )
    warm = [cp.asarray(x) for x in operands("uniform", 64, 64, 64, np.random.default_rng(0))]
    admit(*warm)  # its kernels load on a first call: not in the times below
    for size in args.sizes:
        rng = np.random.default_rng(args.seed)
        print(f"\n{size}^3 | " + " | ".join(methods) + " | admitted (its wall ms, norms included)")
        for kind in args.kinds:
            a, b = (cp.asarray(x) for x in operands(kind, size, size, size, rng))
            cells = []
            for f in methods.values():
                try:
                    mx, med = errors(f(a, b), a, b, xp=cp)
                    cells.append(f"{mx:.1e} / {med:.1e}")
                except (RuntimeError, ValueError, UserError) as exc:  # what cannot run here says why
                    cells.append(f"n/a ({type(exc).__name__})")
            walls = []
            for _ in range(5):  # each ends on the host: its last copy waits for its kernels
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                pick = admit(a, b, max_moduli=12).moduli
                walls.append(1e3 * (time.perf_counter() - t0))
            print(f"{kind} | " + " | ".join(cells) + f" | {pick or '3xTF32'} ({np.median(walls):.3f} ms)")
            del a, b
            cp.get_default_memory_pool().free_all_blocks()
        a, b = (cp.asarray(x) for x in operands("uniform", size, size, size, rng))
        times = {}
        for name, f in methods.items():
            try:
                times[name] = _time(lambda f=f, a=a, b=b: f(a, b), args.reps)
            except (RuntimeError, ValueError, UserError) as exc:
                print(f"{name}: not timed ({type(exc).__name__}: {exc})")
        base = times.get("SGEMM")
        flop = 2.0 * size**3
        print(
            "speed (uniform): "
            + ", ".join(f"{k} {flop / t / 1e12:.1f} TFLOP/s ({base / t:.2f}x SGEMM)" for k, t in times.items())
        )


if __name__ == "__main__":
    main()
