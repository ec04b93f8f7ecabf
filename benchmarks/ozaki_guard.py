"""The per-call check of the Ozaki route against emulated errors, on the CPU (kernels/ozaki_guard.py).

Draws shapes (M and N from 32 to 200, K log-uniform from 2 to 3000) and cycles through the input
kinds; for each, the count the check admits (cap 12), then the route's errors at that count and an
FP32 FMA chain's (sgemm_chain: what cuBLAS's threads sum), in the contract's measures (max and
median, ozaki_choice.errors). Prints each kind's counts and the largest ratio of route to chain,
with its draw; the `high` contract allows 1.5.

    PYTHONPATH=. python benchmarks/ozaki_guard.py [--draws 240] [--seed 7]
"""

from __future__ import annotations

import argparse

import numpy as np

from autotune.kernels.ozaki_choice import KINDS, errors, operands
from autotune.kernels.ozaki_guard import admit, route_product, sgemm_chain


def _ratio(route: float, chain: float) -> float:
    if chain > 0:
        return route / chain
    return 0.0 if route == 0 else float("inf")


def main() -> None:
    """Print the counts per kind and the worst ratio."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=240)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    counts: dict[str, list] = {k: [] for k in KINDS}
    worst = (0.0, "")
    for t in range(args.draws):
        m, n = (int(x) for x in rng.integers(32, 200, 2))
        k = int(np.exp(rng.uniform(np.log(2), np.log(3000))))
        kind = KINDS[t % len(KINDS)]
        a, b = operands(kind, m, k, n, rng)
        v = admit(a, b, max_moduli=12, seed=t)
        counts[kind].append(v.moduli)
        if v.moduli is None:
            continue
        chain, route = errors(sgemm_chain(a, b), a, b), errors(route_product(a, b, v.moduli), a, b)
        r = max(_ratio(route[0], chain[0]), _ratio(route[1], chain[1]))
        if r > worst[0]:
            worst = (r, f"{m}x{k}x{n} {kind}, {v.moduli} moduli: route {route[0]:.2e}/{route[1]:.2e}, "
                        f"chain {chain[0]:.2e}/{chain[1]:.2e} (max/median)")  # fmt: skip
    for kind, got in counts.items():
        shown = ", ".join(f"{c or '3xTF32'}: {got.count(c)}" for c in sorted(set(got), key=lambda c: c or 99))
        print(f"{kind:10s} {shown}")
    print(f"largest route/chain error ratio {worst[0]:.2f} at {worst[1]}")


if __name__ == "__main__":
    main()
