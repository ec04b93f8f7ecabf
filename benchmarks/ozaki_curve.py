"""Ozaki scheme II on the CPU: moduli against the contract's errors, beside FP32 SGEMM, per input kind.

Runs the exact NumPy emulation (autotune/kernels/ozaki.py) at a small shape and prints, per input
kind, the max (normwise) and median (against |A||B|) relative errors of each number of moduli
against the float64 product, with NumPy's FP32 matmul (an SGEMM) for comparison, and the number
of moduli the per-call check (ozaki_guard.admit, cap 12) admits.

    PYTHONPATH=. python benchmarks/ozaki_curve.py [--size 256] [--moduli 5 6 7 8 9 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from autotune.kernels import ozaki
from autotune.kernels.ozaki_choice import KINDS, errors, operands
from autotune.kernels.ozaki_guard import admit


def main() -> None:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=256, help="M = N = K")
    p.add_argument("--moduli", type=int, nargs="+", default=[5, 6, 7, 8, 9, 10])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="draws per kind (medians of their errors)")
    args = p.parse_args()
    n = args.size
    rng = np.random.default_rng(args.seed)
    head = ["kind", "FP32 max", "FP32 med"] + [f"{m}: max / med" for m in args.moduli] + ["admitted"]
    print(f"M = N = K = {n}; errors: max |C - C64| / max |C64|, median |C - C64| / (|A||B|)")
    print(" | ".join(head))
    for kind in KINDS:
        rows = {"fp32": [], **{m: [] for m in args.moduli}}
        picks = []
        for _ in range(args.repeats):
            a, b = operands(kind, n, n, n, rng)
            rows["fp32"].append(errors(a @ b, a, b))
            for m in args.moduli:
                rows[m].append(errors(ozaki.gemm(a, b, m), a, b))
            picks.append(admit(a, b, max_moduli=12).moduli)

        def med(r, i):
            return statistics.median(x[i] for x in r)

        cells = [kind, f"{med(rows['fp32'], 0):.2e}", f"{med(rows['fp32'], 1):.2e}"]
        cells += [f"{med(rows[m], 0):.2e} / {med(rows[m], 1):.2e}" for m in args.moduli]
        cells.append(str(picks[0] or "3xTF32"))
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
