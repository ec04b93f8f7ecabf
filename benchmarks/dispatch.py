"""Host time per call of autotune.matmul, of the kernel it picks called directly, and of
cupy.matmul (and, where torch is importable, of autotune.matmul on torch tensors and
torch.matmul), square float32 at 64^3, 256^3 and 1024^3, out=None (each call allocates its output).

    python benchmarks/dispatch.py                          # results_dir()'s tuned kernels
    python benchmarks/dispatch.py --results DIR --out dispatch.json
    python benchmarks/dispatch.py --profile 64             # where autotune.matmul's host time goes
    python benchmarks/dispatch.py --batch 512 --sizes 64   # strided batches: (512, 64, 64) operands

What is measured, per call:
  host   the time the call takes to return to the caller: argument checks, the choice of kernel,
         the output's allocation and the launches queued (autotune.matmul's minus the loaded
         kernel's is the cost of the dispatch itself). Timed in batches of BATCH calls with a
         synchronize between batches, outside the timed span, so the stream's queue never holds
         more than a batch and no call waits for the GPU; the median batch's time / BATCH is
         reported, and the fastest batch's.
  wall   CALLS back-to-back calls and one synchronize, divided by CALLS. Where the kernel takes
         less GPU time than a call takes host time (64^3, 256^3), this is host time again;
         where it takes more (1024^3 on an H100), the launch queue fills and each call then
         waits for a slot, so wall is the GPU's time per call, not the dispatch's.
Each figure is the median of REPEATS rounds, the calls of a round interleaved (autotune.matmul,
the loaded kernel, cupy.matmul, ...), with Python's garbage collector off while timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CUPY_TF32", "0")  # strict FP32 for cupy.matmul (cuBLAS), as autotune's

import cupy as cp

import autotune
from autotune.dispatch.table import results_dir

SIZES = (64, 256, 1024)
CALLS = {64: 2000, 256: 2000, 1024: 400}  # wall: enough that the first calls' cost is small
BATCH = 25  # host: calls queued between two synchronizes
REPEATS = 3
WARMUP = 50


def _sync() -> None:
    cp.cuda.Device().synchronize()  # every stream of the device: CuPy's and torch's


def host_per_call(fn, calls: int) -> list[float]:
    """Seconds per call of each batch of BATCH calls, the queue emptied before each batch."""
    times = []
    for _ in range(max(1, calls // BATCH)):
        _sync()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        times.append((time.perf_counter() - t0) / BATCH)
    _sync()
    return times


def wall_per_call(fn, calls: int) -> float:
    _sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync()
    return (time.perf_counter() - t0) / calls


def _calls(n: int, batch: int = 1) -> tuple[dict, str]:
    """(name -> a call at n^3 with out=None, each checked against float64 first; the name of the
    config autotune picks). With `batch` > 1 the operands are (batch, n, n) and there is no loaded
    kernel's call (`load` takes one matrix's shape)."""
    rng = cp.random.default_rng(n)
    shape = (n, n) if batch == 1 else (batch, n, n)
    a, b = rng.random(shape, dtype=cp.float32) - 0.5, rng.random(shape, dtype=cp.float32) - 0.5
    calls = {"autotune.matmul": lambda: autotune.matmul(a, b)}
    config = "-"
    if batch == 1:
        kernel = autotune.load((n, n, n))
        calls[f"loaded kernel ({kernel.source})"] = lambda: kernel(a, b)
        config = kernel.config.name
    calls["cupy.matmul"] = lambda: cp.matmul(a, b)
    calls.update(_torch_calls(a, b))
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    for name, fn in calls.items():
        err = float(cp.linalg.norm(cp.asarray(fn()).astype(cp.float64) - ref) / cp.linalg.norm(ref))
        if not err < 1e-4:
            sys.exit(f"{name} at {n}^3: relative error {err:.3g}")
    return calls, config


def _torch_calls(a, b) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False  # strict FP32, like the others
    at, bt = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")  # no copies
    return {"autotune.matmul, torch": lambda: autotune.matmul(at, bt), "torch.matmul": lambda: torch.matmul(at, bt)}


def measure(n: int, batch: int = 1) -> list[dict]:
    calls, config = _calls(n, batch)
    host = {name: [] for name in calls}
    wall = {name: [] for name in calls}
    for fn in calls.values():
        for _ in range(WARMUP):
            fn()
    _sync()
    gc.disable()
    try:
        for _ in range(REPEATS):
            for name, fn in calls.items():
                host[name].append(host_per_call(fn, CALLS[n]))
                wall[name].append(wall_per_call(fn, CALLS[n]))
    finally:
        gc.enable()
    return [
        {
            "n": n,
            "batch": batch,
            "call": name,
            "host_us": 1e6 * statistics.median(statistics.median(r) for r in host[name]),
            "host_us_min": 1e6 * min(min(r) for r in host[name]),
            "wall_us": 1e6 * statistics.median(wall[name]),
            "calls": CALLS[n],
            "config": config,
        }
        for name in calls
    ]


def table(rows: list[dict]) -> str:
    lines = [
        "| shape | call | host µs/call (median) | host µs/call (fastest batch) | wall µs/call | calls |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        times = f"{r['host_us']:.1f} | {r['host_us_min']:.1f} | {r['wall_us']:.1f}"
        shape = f"{r['n']}^3" + (f" x {r['batch']}" if r.get("batch", 1) > 1 else "")
        lines.append(f"| {shape} | {r['call']} | {times} | {r['calls']} |")
    return "\n".join(lines)


def overheads(rows: list[dict]) -> list[str]:
    """autotune.matmul's host time over the loaded kernel's (over cupy.matmul's for batches), per size."""
    out = []
    for n in sorted({r["n"] for r in rows}):
        by = {r["call"].split(" (")[0]: r["host_us"] for r in rows if r["n"] == n}
        base = "loaded kernel" if "loaded kernel" in by else "cupy.matmul"
        extra = by["autotune.matmul"] - by[base]
        out.append(f"{n}^3: dispatch overhead (autotune.matmul - {base}, host) {extra:.1f} µs")
    return out


def profile(n: int, calls: int = 20000, batch: int = 1) -> str:
    """cProfile of `calls` autotune.matmul calls at n^3 (a synchronize every BATCH calls): the
    functions that take the host time, by their own time."""
    import cProfile
    import io
    import pstats

    calls_, _ = _calls(n, batch)
    fn = calls_["autotune.matmul"]
    for _ in range(WARMUP):
        fn()
    prof = cProfile.Profile()
    prof.enable()
    host_per_call(fn, calls)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    return out.getvalue()


def _versions() -> dict:
    versions = {"cupy": cp.__version__, "python": sys.version.split()[0], "autotune": autotune.__version__}
    if "torch" in sys.modules:
        versions["torch"] = sys.modules["torch"].__version__
    return versions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=None, help="results folder (default: results_dir())")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help=f"comma list of n, of {sorted(CALLS)}")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    ap.add_argument("--profile", type=int, metavar="N", help="instead: profile autotune.matmul at N^3")
    ap.add_argument("--batch", type=int, default=1, help="matrices a call: (batch, n, n) operands (default 1)")
    args = ap.parse_args()
    if args.batch < 1:
        ap.error("--batch must be at least 1")
    results = args.results or results_dir()
    os.environ["AUTOTUNE_RESULTS"] = str(results)  # matmul's folder, and load's
    if args.profile:
        print(profile(args.profile, batch=args.batch))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    if not set(sizes) <= set(CALLS):
        ap.error(f"--sizes: each of {sorted(CALLS)}")
    rows = [row for n in sizes for row in measure(n, args.batch)]
    print(table(rows))
    print()
    print("\n".join(overheads(rows)))
    if args.out:
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        record = {
            "command": "python benchmarks/dispatch.py " + shlex.join(sys.argv[1:]),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            "versions": _versions(),
            "results": str(results),
            "method": {"batch": BATCH, "repeats": REPEATS, "warmup": WARMUP},
            "rows": rows,
        }
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
