"""How many NVRTC compiles a second this host does, split over P processes of T threads each.

A search worker compiles its candidates on threads of its own process; `--workers W` runs W such
processes on one host. Whether W workers get W times the compiles depends on the host's cores
(physical or hyperthreads), its clocks under load and anything NVRTC serialises. This measures
it: for each setting PxT, the same N compiles (a family's seeds, each made unique so no cache
serves it) are split over P processes started together, each compiling its share on T threads.
No GPU needed. One JSON line per setting: wall seconds, compiles a second, and the mean and
median seconds of one compile as its thread saw it.

    python benchmarks/compile_throughput.py --compiles 64 --settings 1x8,1x16,2x8,2x16,1x32
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compile_stress import sources  # beside this script: a family's seeds, each made unique


def child(jobs, arch: str, threads: int, start, out) -> None:  # pragma: no cover - subprocess
    import cupy  # noqa: F401 - CuPy first, as in a search worker

    from autotune.gpu.compile import CompileError, _nvrtc, compile_many

    _nvrtc()
    start.wait()
    t0 = time.perf_counter()
    res = compile_many(jobs, arch, workers=threads, use_cache=False)
    out.put(
        {
            "s": time.perf_counter() - t0,
            "each": [r.compile_s for r in res if not isinstance(r, CompileError)],
            "failed": sum(isinstance(r, CompileError) for r in res),
        }
    )


def measure(family: str, n: int, procs: int, threads: int, arch: str) -> dict:
    ctx = mp.get_context("spawn")
    jobs = sources(family, n, f"{os.getpid()}-{time.time_ns()}")
    start, out = ctx.Barrier(procs + 1), ctx.Queue()
    ps = [ctx.Process(target=child, args=(jobs[i::procs], arch, threads, start, out)) for i in range(procs)]
    for p in ps:
        p.start()
    start.wait()  # every process has NVRTC loaded: the clock starts at the first compile
    t0 = time.perf_counter()
    got = [out.get() for _ in ps]
    wall = time.perf_counter() - t0
    for p in ps:
        p.join()
    each = [s for g in got for s in g["each"]]
    return {
        "setting": f"{procs}x{threads}",
        "compiles": n,
        "failed": sum(g["failed"] for g in got),
        "wall_s": round(wall, 2),
        "per_s": round(n / wall, 2),
        "compile_mean_s": round(statistics.fmean(each), 2) if each else None,
        "compile_median_s": round(statistics.median(each), 2) if each else None,
        "cpus": os.cpu_count(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="warptile")
    ap.add_argument("--compiles", type=int, default=64, help="compiles a setting (default 64)")
    ap.add_argument("--settings", default="1x8,1x16,2x8,2x16", help="PxT,...: P processes of T threads")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    for s in args.settings.split(","):
        procs, threads = (int(x) for x in s.lower().split("x"))
        print(json.dumps(measure(args.family, args.compiles, procs, threads, args.arch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
