"""The shortest time a launch can show under the search's timer: kernels that do (almost) nothing,
timed exactly as candidates and cuBLAS are (the runner's input sets, a spin kernel ahead of the
launches, CUDA events between them, the median), at the shapes given.

    python benchmarks/launch_floor.py --shapes 32,64,128,1x3000x1000

Per shape: an empty kernel (one block of 32 threads; 132 blocks of 256), a kernel that reads one
float of A and B and writes one of C per thread over C's first 256 elements, and cuBLAS (the
faster of cupy.matmul and gemm). Where a tuned kernel sits close to the empty launch, it is
launch-bound and no kernel can gain much there; the gap between the two is what a kernel can win.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Problem
from autotune.gpu.runner import Runner

_SOURCE = r"""
extern "C" __global__ void at_empty(const float* A, const float* B, float* C) {}
extern "C" __global__ void at_touch(const float* A, const float* B, float* C, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) C[i] = A[i] * B[i];
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="32,64,128", help="comma list of N or MxNxK")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    import cupy as cp

    module = cp.RawModule(code=_SOURCE)
    empty, touch = module.get_function("at_empty"), module.get_function("at_touch")
    runner = Runner(0)
    rows = []
    for text in args.shapes.split(","):
        p = Problem.parse(text)
        runner.setup(p.M, p.N, p.K)
        n = min(256, p.M * p.N, p.M * p.K, p.K * p.N)
        kernels = {
            "empty 1x32": lambda a, b, c, alpha=1.0, beta=0.0: empty((1,), (32,), (a, b, c)),
            "empty 132x256": lambda a, b, c, alpha=1.0, beta=0.0: empty((132,), (256,), (a, b, c)),
            "touch 256": lambda a, b, c, alpha=1.0, beta=0.0, n=n: touch((1,), (256,), (a, b, c, cp.int32(n))),
        }
        row = {"shape": text}
        for name, fn in kernels.items():
            row[name] = runner.time(fn)  # the runner's own loop around this launch
        row["cublas"] = min((runner.time(path) for path in ("matmul", "gemm")), key=lambda t: t["time_ms"])
        rows.append(row)
        timed = [(k, v) for k, v in row.items() if k != "shape"]
        cells = [f"{k} {v['time_ms'] * 1e3:.2f} us (min {v['time_min_ms'] * 1e3:.2f})" for k, v in timed]
        print(f"{text:>14}: " + ", ".join(cells), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
