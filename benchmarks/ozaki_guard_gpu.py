"""What the Ozaki route's per-call check costs on the device, beside the route it guards.

At each size (M = N = K, uniform inputs, op(A) stored as is and as a transpose): the wall time of
gpu/ozaki_guard.py's admit from a synchronized device to its verdict on the host (median and
spread of --reps calls), with its norms made in it and with them given (as the scaling pass
hands them over), its GPU time alone (CUDA events around the launches, before the copy), and the
route's own time at the admitted count (OzakiGemm, CUDA events): the check as a share of a call;
then the whole route with its check (gpu/ozaki_route.py: the norms made once for both) against
cuBLAS SGEMM (CuPy's matmul, TF32 off) in the same process: with the check on the caller's stream
or its own (overlap), the host waiting for the verdict or not (speculate); and the advantage
measured of that SGEMM at the shape (DeviceGuard.advantage), with the route at the count it admits.

    PYTHONPATH=. python benchmarks/ozaki_guard_gpu.py [--sizes 2048 4096 8192] [--reps 30]
"""

from __future__ import annotations

import argparse
import time

import cupy as cp
import numpy as np
from ozaki_gpu import _time

from autotune.gpu.ozaki import OzakiGemm
from autotune.gpu.ozaki_guard import DeviceGuard
from autotune.gpu.ozaki_route import OzakiRoute
from autotune.kernels.ozaki_guard import ADVANTAGE


def _walls(f, reps: int) -> list[float]:
    """Return the wall seconds of `f` from a synchronized device, `reps` times."""
    out = []
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


def _line(guard: DeviceGuard, engines: dict, x: cp.ndarray, b: cp.ndarray, reps: int) -> str:
    """Return one layout's figures: the check's times and the route's."""
    v = guard.admit(x, b)  # the first call loads the kernels and uploads the sample
    norms = guard.norms(x, 0), guard.norms(b, 1)
    full = np.array(_walls(lambda: guard.admit(x, b), reps)) * 1e6
    given = np.array(_walls(lambda: guard.admit(x, b, norms=norms), reps)) * 1e6
    gpu = _time(lambda: guard.admit(x, b), reps) * 1e6
    n = v.moduli or 8
    if n not in engines:  # built once: setdefault would build one at every call
        engines[n] = OzakiGemm(n)
    eng = engines[n]
    route = _time(lambda: eng(x, b), 10) * 1e6
    sgemm = _time(lambda: cp.matmul(x, b), 10) * 1e6
    adv = max(guard.advantage(x, b, cp.matmul(x, b), seed) for seed in range(3))
    modes = []
    for overlap, speculate, advantage in (
        (0, 0, ADVANTAGE),
        (1, 0, ADVANTAGE),
        (0, 1, ADVANTAGE),
        (1, 1, ADVANTAGE),
        (1, 1, adv),
    ):
        checked = OzakiRoute(fallback=lambda *args: None, advantage=advantage, overlap=overlap, speculate=speculate)
        ran = checked(x, b).moduli
        whole = _time(lambda checked=checked: checked(x, b), 10) * 1e6
        tag = f"overlap {overlap} speculate {speculate}" + (
            f" advantage {advantage:.2f}" if advantage != ADVANTAGE else ""
        )
        if ran not in engines:
            engines[ran] = OzakiGemm(ran)
        alone = _time(lambda e=engines[ran]: e(x, b), 10) * 1e6
        modes.append(f"{tag} ({ran} moduli, engine alone {alone:.0f}) {whole:.0f} = {sgemm / whole:.2f}x")
    return (
        f"admits {v.moduli}; check {np.median(full):.0f} [{full.min():.0f}, {full.max():.0f}], norms given "
        f"{np.median(given):.0f}, as events {gpu:.0f}; engine ({n} moduli) {route:.0f}: "
        f"the check {np.median(full) / route:.1%} of it, {np.median(given) / route:.1%} with norms given; "
        f"SGEMM {sgemm:.0f}: engine {sgemm / route:.2f}x; SGEMM's measured advantage {adv:.2f}; route with "
        f"its check: " + "; ".join(modes)
    )


def main() -> None:
    """Print a line per size and layout."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096, 8192])
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    guard, engines = DeviceGuard(), {}
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; times in us (wall: median [min, max])")
    for size in args.sizes:
        rng = cp.random.default_rng(size)
        a, b = rng.random((size, size), dtype=cp.float32) * 2 - 1, rng.random((size, size), dtype=cp.float32) * 2 - 1
        for name, x in (("A", a), ("A^T", cp.ascontiguousarray(a.T).T)):
            print(f"{size}^3 {name}: {_line(guard, engines, x, b, args.reps)}")


if __name__ == "__main__":
    main()
