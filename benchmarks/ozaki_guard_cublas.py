"""The Ozaki check's model against cuBLAS on the device: how far cuBLAS sums better than one chain.

The check (kernels/ozaki_guard.py) compares the route's modelled error with an FP32 FMA chain's and
admits a count within RATIO of it; the `high` contract compares with cuBLAS SGEMM's measured error,
at most 1.5x. Draws shapes (M, N from 32 to 512, K log-uniform from 16 to 8192) cycling through
the input kinds; at each count from 6 to 9 it measures the route (gpu/ozaki.py) and cuBLAS (CuPy's
matmul, TF32 off) against a float64 product, and prints per kind the largest factor of measured
ratio (route / cuBLAS) over modelled ratio (route / the modelled SGEMM: one chain ADVANTAGE times
more accurate), normwise and median, then for each candidate threshold (RATIO first) the draws
whose admitted count breaks the contract and the mean count admitted.

    PYTHONPATH=. python benchmarks/ozaki_guard_cublas.py [--draws 120] [--seed 1] [--ratios 1.1 0.9]
        [--mn 32 512] [--k 16 8192]
"""

from __future__ import annotations

import argparse
import math
import os
from collections import defaultdict

import cupy as cp
import numpy as np

from autotune.gpu.ozaki import OzakiGemm
from autotune.kernels.ozaki import fits
from autotune.kernels.ozaki_choice import KINDS, errors, operands
from autotune.kernels.ozaki_guard import RATIO, _Sample, sample_stats

COUNTS = (6, 7, 8, 9)
CONTRACT = 1.5  # core/tiers.py: `high` allows 1.5x cuBLAS FP32's errors


def _ratio(x: float, y: float) -> float:
    return x / y if y > 0 else (0.0 if x == 0 else math.inf)


def main() -> None:
    """Print the factors per kind and each candidate RATIO's breaks."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=120)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ratios", type=float, nargs="+", default=[RATIO, 0.9, 0.75])
    p.add_argument("--mn", type=int, nargs=2, default=[32, 512], help="M and N drawn from LO to HI")
    p.add_argument("--k", type=int, nargs=2, default=[16, 8192], help="K log-uniform from LO to HI")
    args = p.parse_args()
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise SystemExit("CUPY_TF32 is set: cuBLAS would not run SGEMM")
    rng, engines = np.random.default_rng(args.seed), {n: OzakiGemm(n) for n in COUNTS}
    kinds = [k for k in KINDS if k != "coupled"]  # coupled needs 10-11: past the counts measured
    worst = defaultdict(lambda: [0.0, 0.0, ""])
    breaks, admitted = defaultdict(int), defaultdict(list)
    for t in range(args.draws):
        kind = kinds[t % len(kinds)]
        m, n = (int(rng.integers(args.mn[0], args.mn[1] + 1)) for _ in range(2))
        k = int(np.exp(rng.uniform(np.log(args.k[0]), np.log(args.k[1]))))
        a, b = operands(kind, m, k, n, rng)
        da, db = cp.asarray(a), cp.asarray(b)
        ref = errors(cp.matmul(da, db), da, db, xp=cp)
        counts = [c for c in COUNTS if fits(c, k)]
        na, nb = np.linalg.norm(a.astype(np.float64), axis=1), np.linalg.norm(b.astype(np.float64), axis=0)
        sample = _Sample(na, nb, (m, k, n), t, counts, sample_stats(a, b))
        rows = {}
        for c in counts:
            v = sample.judge(c)
            got = errors(engines[c](da, db), da, db, xp=cp)
            meas = (_ratio(got[0], ref[0]), _ratio(got[1], ref[1]))
            rows[c] = (v.normwise, v.median, meas)
            for i, model in enumerate((v.normwise, v.median)):
                if 0 < model <= 2 and math.isfinite(meas[i]):
                    f = meas[i] / model
                    if f > worst[kind][i]:
                        worst[kind][i] = f
                        if i == 1:
                            worst[kind][2] = f"{m}x{k}x{n} at {c}"
        for r in args.ratios:
            ok = [c for c in counts if rows[c][0] <= r and rows[c][1] <= r]
            if not ok:
                continue
            c = ok[0]
            admitted[(r, kind)].append(c)
            if max(rows[c][2]) > CONTRACT:
                breaks[(r, kind)] += 1
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; {args.draws} draws, seed {args.seed}")
    print("measured (route / cuBLAS) over modelled (route / SGEMM), the largest: normwise, median (its draw)")
    for kind in kinds:
        nw, md, at = worst[kind]
        print(f"  {kind:10} {nw:6.2f} {md:6.2f}  ({at})")
    for r in args.ratios:
        cells = []
        for kind in kinds:
            got = admitted[(r, kind)]
            mean = f"{np.mean(got):.2f}" if got else "-"
            cells.append(f"{kind} {breaks[(r, kind)]}/{len(got)} ({mean})")
        print(f"RATIO {r}: breaks/admitted (mean count): " + ", ".join(cells))


if __name__ == "__main__":
    main()
