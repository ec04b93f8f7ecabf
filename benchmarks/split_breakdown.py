"""Time the parts of a split launch (STREAMK 2) against the whole-tile kernel and cuBLAS.

    python benchmarks/split_breakdown.py --shapes 4096,8192 [--group-m 64]

For each shape: the whole-tile config (STREAMK 0), the same config as a split launch, its main
kernel alone (the whole waves), its tail alone (the _scale_tiles prologue and the tail kernel),
the whole-tile kernel over one full wave (SLOTS tiles) and over as many tiles as the tail has,
and cuBLAS -- medians of CUDA-event timings in one process, each row's start and end printed
(UTC), so that clocks and power sampled alongside (nvidia-smi -lms) can be matched to it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

os.environ.setdefault("CUPY_TF32", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from _probe import seed_params  # noqa: E402

from autotune.api import Kernel  # noqa: E402
from autotune.types import Config  # noqa: E402


def median_ms(fn, reps: int) -> float:
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1))
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="4096", help="comma list of N or MxNxK")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--set", default="", help="params over the first warptile seed, e.g. GROUP_M=8,STAGES=8")
    args = ap.parse_args()
    base = seed_params(args.set)
    arch = f"sm_{cp.cuda.Device().compute_capability}"
    whole = Kernel(Config.make("warptile", {**base, "STREAMK": 0}), arch)
    split = Kernel(Config.make("warptile", {**base, "STREAMK": 2}), arch)
    lk = split._kernel
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, slots {lk.slots}, "
          f"params {Config.make('warptile', base).name}")
    for shape in args.shapes.split(","):
        M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
        rng = cp.random.default_rng(0)
        a = rng.random((M, K), dtype=cp.float32) * 2 - 1
        b = rng.random((K, N), dtype=cp.float32) * 2 - 1
        c = cp.empty((M, N), cp.float32)
        g = lk.geometry(M, N, K)
        i32, f32 = np.int32, np.float32
        args_main = (i32(M), i32(N), i32(K), f32(1.0), a, b, f32(0.0), c, np.uint64(0), i32(N))
        smem = g["dynamic_smem"]

        def main_only():
            if g["grid"][0]:
                lk.fn(tuple(g["grid"]), (g["block"], 1, 1), args_main, shared_mem=smem)

        def whole_tiles(n):
            return lambda: lk.fn((n, 1, 1), (g["block"], 1, 1), args_main, shared_mem=smem)

        def tail_only():
            if g["tail_tiles"]:
                lk.scale_tiles((g["tail_tiles"], 1, 1), (256, 1, 1), (i32(M), i32(N), f32(0.0), c, i32(g["tail_first"])))
                lk.tail((g["tail_grid"], 1, 1), (g["block"], 1, 1), (*args_main, i32(g["tail_first"])), shared_mem=smem)

        flop = 2.0 * M * N * K
        rows = [("cuBLAS", lambda: cp.matmul(a, b, out=c)), ("whole tiles", lambda: whole(a, b, c)),
                ("split launch", lambda: split(a, b, c)), ("  main kernel only", main_only),
                ("  tail only (scale + tail)", tail_only),
                (f"  one wave: {lk.slots} whole tiles", whole_tiles(lk.slots))]
        if g["tail_tiles"]:
            rows.append((f"  {g['tail_tiles']} whole tiles", whole_tiles(g["tail_tiles"])))
        rows.append(("cuBLAS again", lambda: cp.matmul(a, b, out=c)))
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        split(a, b, c)
        err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
        print(f"\n== {M}x{N}x{K}: {g['grid'][0]} whole tiles + tail of {g['tail_tiles']} tiles over "
              f"{g['tail_grid']} blocks; split-launch error {err:.1e}")
        ms = {}
        for name, fn in rows:
            t0 = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
            ms[name] = median_ms(fn, args.reps)
            t1 = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
            print(f"   [{t0} - {t1}] {name.strip()}", flush=True)
        blas = (ms["cuBLAS"] + ms["cuBLAS again"]) / 2
        for name, t in ms.items():
            if name.startswith("  "):  # a part: its share of the whole-tile kernel's time
                print(f"   {name:28s} {t * 1e3:9.1f} us  {100 * t / ms['whole tiles']:6.1f}% of whole tiles")
            else:
                print(f"   {name:28s} {t * 1e3:9.1f} us  {flop / t / 1e9:8.1f} TFLOP/s  {blas / t:6.3f}x cuBLAS")


if __name__ == "__main__":
    main()
