"""How much more accurately than one FP32 chain cuBLAS SGEMM sums, shape by shape, on the device.

The Ozaki check (kernels/ozaki_guard.py) holds the route to an SGEMM modelled as one FMA chain
`advantage` times more accurate; ADVANTAGE (3.7) is the most measured where cuBLAS splits K. At
each shape (M x N x K) and input kind this measures cuBLAS's own (DeviceGuard.advantage: its errors
at the check's sample, CuPy's matmul with TF32 off) over --seeds draws, and prints the largest with
the spread, and the counts the check admits at ADVANTAGE and at the largest measured.

    PYTHONPATH=. python benchmarks/ozaki_advantage_gpu.py [--shapes 4096x4096x4096 ...] [--seeds 3]
"""

from __future__ import annotations

import argparse

import cupy as cp
import numpy as np

from autotune.gpu.ozaki_guard import DeviceGuard
from autotune.kernels.ozaki_choice import operands
from autotune.kernels.ozaki_guard import ADVANTAGE

SHAPES = [
    "1024x1024x1024",
    "2048x2048x2048",
    "4096x4096x4096",
    "8192x8192x8192",
    "4096x4096x16384",
    "8192x8192x1024",
    "1024x1024x32768",
    "256x256x16384",
]


def main() -> None:
    """Print a line per shape and kind."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=SHAPES, help="MxNxK each")
    p.add_argument("--kinds", nargs="+", default=["uniform", "normal", "wide"])
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args()
    guard = DeviceGuard()
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; ADVANTAGE {ADVANTAGE}")
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        for kind in args.kinds:
            advs, counts = [], []
            for seed in range(args.seeds):
                a, b = (cp.asarray(x) for x in operands(kind, m, k, n, np.random.default_rng(seed)))
                adv = guard.advantage(a, b, cp.matmul(a, b), seed)
                advs.append(adv)
                counts.append((guard.admit(a, b).moduli, guard.admit(a, b, advantage=adv).moduli))
            print(
                f"{shape} {kind}: advantage max {max(advs):.2f} [{min(advs):.2f}, {np.median(advs):.2f}]; "
                f"admitted at ADVANTAGE {[c[0] for c in counts]}, at the measured {[c[1] for c in counts]}"
            )


if __name__ == "__main__":
    main()
