"""How fast the split launch's tail kernel runs per k-iteration, against the whole-tile kernel.

    python benchmarks/tail_rate.py [--size 4096] [--reps 12] [--calls 20]

At an M = N = size, K = size shape (128 x 256 tiles, one block per SM), in one process, each
kernel launched alone `calls` times back to back between two CUDA events (C is not scaled first:
the results are not checked, only timed):
- the whole-tile kernel over one and two full waves (SLOTS and 2 SLOTS tiles),
- the tail kernel over SLOTS and 2 SLOTS tiles on SLOTS blocks: every block one or two whole
  tiles, aligned (the same work as the waves, with the tail's code and atomic epilogue),
- the tail kernel over the split launch's own tail (the tiles past the last whole wave): each
  block a share that starts and ends inside tiles,
- the tail kernel over that many tiles plus one, minus one (how the time moves with the work).
Per-k-iteration rates make the rows comparable.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("CUPY_TF32", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from _probe import interleaved_ms, load_warptile, seed_params  # noqa: E402

from autotune.types import Config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--set", default="", help="params over the first warptile seed, e.g. LANES_N=4")
    args = ap.parse_args()
    base = seed_params(args.set, STREAMK=2)
    cfg = Config.make("warptile", base)
    lk = load_warptile(base)
    S = M = N = K = args.size
    G = lk.slots
    tiles = -(-M // 128) * -(-N // 256)
    ktiles = -(-K // base["BK"])
    geo = lk.geometry(M, N, K)
    assert base["BM"] == 128 and base["BN"] == 256 and tiles >= 2 * G, "the probe assumes 128 x 256 tiles, 2+ waves"
    rng = cp.random.default_rng(1)
    a = rng.random((M, K), dtype=cp.float32)
    b = rng.random((K, N), dtype=cp.float32)
    c = cp.zeros((M, N), cp.float32)
    i32, f32 = np.int32, np.float32
    common = (i32(M), i32(N), i32(K), f32(1.0), a, b, f32(0.0), c, np.uint64(0), i32(N))
    smem, block = geo["dynamic_smem"], geo["block"]

    def main_kernel(n):
        return lambda: lk.fn((n, 1, 1), (block, 1, 1), common, shared_mem=smem)

    def tail_kernel(n_tiles, grid):
        return lambda: lk.tail((grid, 1, 1), (block, 1, 1), (*common, i32(tiles - n_tiles)), shared_mem=smem)

    T = geo["tail_tiles"]
    rows = {  # name: (launch, k-iterations of work)
        f"whole-tile kernel, {G} tiles": (main_kernel(G), G * ktiles),
        f"whole-tile kernel, {2 * G} tiles": (main_kernel(2 * G), 2 * G * ktiles),
        f"tail kernel, {G} tiles on {G} blocks": (tail_kernel(G, G), G * ktiles),
        f"tail kernel, {2 * G} tiles on {G} blocks": (tail_kernel(2 * G, G), 2 * G * ktiles),
        f"tail kernel, {T} tiles (the tail) on {G}": (tail_kernel(T, G), T * ktiles),
        f"tail kernel, {T - 1} tiles on {G}": (tail_kernel(T - 1, G), (T - 1) * ktiles),
        f"tail kernel, {T + 1} tiles on {G}": (tail_kernel(T + 1, G), (T + 1) * ktiles),
    }
    for fn, _ in rows.values():
        fn()
    cp.cuda.Device().synchronize()
    times = interleaved_ms({name: fn for name, (fn, _) in rows.items()}, args.reps, args.calls)
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {S}^3, slots {G}, {ktiles} k-tiles per tile, "
          f"params {cfg.name}")
    ref = None
    for name, (_, iters) in rows.items():
        us = float(np.median(times[name])) * 1000
        per_sm = us / (iters / G)  # us per k-iteration of one SM
        ref = ref or per_sm
        print(f"  {name:42s} {us:8.1f} us  {iters / G / ktiles:5.2f} tiles per SM  "
              f"{per_sm * 1000:7.1f} ns per k-iteration per SM ({per_sm / ref:5.3f}x the first row)  "
              f"spread {np.ptp(times[name]) / us:5.1%}")


if __name__ == "__main__":
    main()
