"""autotune.matmul on shapes nobody tuned, against cuBLAS: the kernel the dispatch picks from the
stored results alone (autotune/dispatch/model.py), and what the nearest tuned shape's winner would give.

    python benchmarks/untuned.py                        # results_dir()'s records, the 20 shapes below
    python benchmarks/untuned.py --results DIR --out untuned.json
    python benchmarks/untuned.py --draw 30 --seed 57     # a seeded draw: six regimes, four layouts
    python benchmarks/untuned.py --batches 16 --seed 1   # strided batches: attention's QK^T and PV, small matrices

For each shape: the model's choice and the nearest-shape choice (both built for the layout and
compiled, verified against float64), and cupy.matmul (cuBLAS), each timed by CUDA events around
REPS back-to-back calls on the same operands after a warm-up, the median of ROUNDS rounds,
the three interleaved in each round. Below some 30 us a call that is the host's time to make
the call, not the GPU's, so the two autotune kernels are also timed as a CUDA graph of REPS
calls captured once and replayed ("graph_ms": the GPU's time alone); CuPy refuses to call cuBLAS
during a capture, so the ratios are of calls. Host time a call is benchmarks/dispatch.py's.
A shape that is in the results is skipped: the point is shapes the table does not hold.
A batch (`--batches`, or a shape such as 384x384x64_b96) is a 3-D array of matrices, timed against
cupy.matmul on the same arrays (cuBLAS's strided batched GEMM).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CUPY_TF32", "0")

import cupy as cp

import autotune
from autotune.core.types import Problem
from autotune.dispatch import api
from autotune.dispatch import table as dispatch_table
from autotune.records.results import entry_config

# Spread over the regimes of the small-shape issue and large odd shapes; none is in the table.
SHAPES = [
    "5000", "1500", "777", "96", "3x4096x4096", "12x8192x8192", "40x4096x4096", "200x11008x4096",
    "4096x3x4096", "8192x40x8192", "4096x200x4096", "128x128x32768", "512x512x65536", "2000x2000x32",
    "8192x8192x128", "6000x1000x3000", "1000x6000x3000", "33x33x33", "300x400x500", "2048x8192x1024",
]  # fmt: skip
ROUNDS, WARMUP = 5, 3
# The batches of the issue that found them 0.28-0.60x cupy.matmul, first in every batch draw.
KNOWN_BATCHES = ["384x384x64_b96", "384x64x384_b96", "64x64x64_b512", "1024x1024x128_b12"]


def gpu_ms(fn, reps: int) -> float:
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) / reps


def graph_ms(fn, reps: int) -> float:
    """GPU time a call of `fn`, from a CUDA graph of `reps` calls captured once (raises if a call
    cannot be captured)."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()  # workspaces and per-shape caches made before the capture
        stream.synchronize()
        stream.begin_capture()
        try:
            for _ in range(reps):
                fn()
        finally:
            graph = stream.end_capture()
        graph.launch(stream)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(ROUNDS):
            e0.record(stream)
            graph.launch(stream)
            e1.record(stream)
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1) / reps)
    return statistics.median(times)


def draw(seed: int, count: int) -> list[str]:
    """`count` shapes over six regimes in turn (square, few rows, few columns, short K, deep K,
    odd), log-uniform sizes, the four layouts in turn: examples/sgemm_dispatch.cu's draw."""
    rng = random.Random(seed)

    def dim(lo: float, hi: float) -> int:
        return round(2 ** rng.uniform(lo, hi))

    ranges = [((8, 12.5),) * 3, ((0, 5), (11, 13.5), (10, 13)), ((11, 13.5), (0, 5), (10, 13)),
              ((10, 13), (10, 13), (2, 7)), ((6, 9), (6, 9), (12, 15)), ((7, 12), (5, 12), (5, 12))]  # fmt: skip
    shapes = []
    for i in range(count):
        m, n, k = (dim(*r) for r in ranges[i % 6])
        if i % 6 == 0:
            n = k = m
        layout = "nt"[(i // 2) % 2] + "nt"[((i // 3) % 2) ^ (i % 2)]
        shapes.append(f"{m}x{n}x{k}" + ("" if layout == "nn" else f"_{layout}"))
    return shapes


def drawn_batches(seed: int, count: int) -> list[Problem]:
    """Return a seeded draw of attention QK^T (nt) and PV (nn) batches and of many small matrices."""
    rng = random.Random(seed)
    out = [Problem.parse(s) for s in KNOWN_BATCHES]
    while len(out) < count:
        kind = rng.choice(["qk", "pv", "small"])
        if kind == "small":
            m, n, k = (rng.choice([8, 16, 24, 32, 48, 64, 96, 128]) for _ in range(3))
            out.append(Problem(m, n, k, batch=rng.choice([256, 1024, 4096])))
            continue
        heads = rng.choice([12, 16, 32, 96]) * rng.choice([1, 2, 8])
        seq, d = rng.choice([128, 197, 256, 512, 1024, 2048]), rng.choice([64, 80, 128])
        if kind == "qk":  # Q (seq x d) @ K^T: K stored (seq x d), read transposed
            out.append(Problem(seq, seq, d, "nt", heads))
        else:  # softmax(QK^T) (seq x seq) @ V (seq x d)
            out.append(Problem(seq, d, seq, "nn", heads))
    return out


def measure(problem: Problem, table, slug: str, arch: str) -> dict:
    M, N, K = problem.M, problem.N, problem.K
    ta, tb = problem.trans
    rng = cp.random.default_rng(0)
    lead = (problem.batch,) if problem.batch > 1 else ()
    # Operands stored as the layout says; the calls below see op(A) and op(B) as views.
    a = rng.random((*lead, *((K, M) if ta else (M, K))), dtype=cp.float32) - 0.5
    b = rng.random((*lead, *((N, K) if tb else (K, N))), dtype=cp.float32) - 0.5
    a, b = (a.swapaxes(-1, -2) if ta else a), (b.swapaxes(-1, -2) if tb else b)
    out = cp.empty((*lead, M, N), dtype=cp.float32)
    chosen = api._choose(cp.cuda.Device().id, Problem(M, N, K, problem.layout, problem.batch))
    near = table.nearest(problem, None)
    built = dispatch_table.built_for(entry_config(near[1]), problem.layout, problem.batch)
    nearest = api._kernel(built, cp.cuda.Device().id, arch, "nearest")
    calls = {
        "model": lambda: chosen(a, b, out),
        "nearest": lambda: nearest(a, b, out),
        "matmul": lambda: autotune.matmul(a, b, out=out),  # its first call (here) times its contenders
        "cublas": lambda: cp.matmul(a, b, out=out),
    }
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    for name, fn in calls.items():
        fn()
        err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
        if not err < 1e-4:
            sys.exit(f"{name} at {problem.name}: relative error {err:.3g}")
    est = max(gpu_ms(calls["cublas"], 1), 1e-3)
    reps = int(min(200, max(5, 20 / est)))
    times = {name: [] for name in calls}
    for _ in range(ROUNDS):
        for name, fn in calls.items():
            for _ in range(WARMUP):
                fn()
            times[name].append(gpu_ms(fn, reps))
    med = {name: statistics.median(t) for name, t in times.items()}
    graph = {}
    for name in ("model", "nearest"):
        try:
            graph[name] = graph_ms(calls[name], reps)
        except Exception as exc:  # noqa: BLE001 - reported, not fatal: the plain timing stands
            print(f"{problem.name}: {name} not captured as a graph ({exc})", file=sys.stderr)
            graph[name] = None
    return {
        "shape": problem.name,
        "model": chosen.config.name,
        "model_source": chosen.source,
        "nearest": nearest.config.name,
        "nearest_shape": near[0].name,
        "ms": med,
        "matmul": repr(matmul_kernel(problem)),
        "x_cublas": {k: med["cublas"] / med[k] for k in ("model", "nearest", "matmul")},
        "graph_ms": graph,
        "reps": reps,
    }


def matmul_kernel(problem: Problem):
    """Return what autotune.matmul settled on for the problem (its first call timed the contenders)."""
    dev = cp.cuda.Device().id
    table = dispatch_table.table_for(None, api._device_props(dev)[0])
    return next((k for key, k in table.settled.items() if key[1:5] == (problem.M, problem.N, problem.K, problem.layout)
                 and key[5] == problem.batch), None)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=None, help="results folder (default: results_dir())")
    ap.add_argument("--shapes", help="comma list instead of the 20 built in")
    ap.add_argument("--draw", type=int, metavar="N", help="N shapes of a seeded draw instead (all layouts)")
    ap.add_argument("--batches", type=int, metavar="N", help="N strided batches of a seeded draw instead")
    ap.add_argument("--seed", type=int, default=57, help="the draw's seed (default 57)")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args()
    results = args.results or dispatch_table.results_dir()
    os.environ["AUTOTUNE_RESULTS"] = str(results)
    slug, arch = api._device_props(cp.cuda.Device().id)
    table = dispatch_table.table_for(results, slug)
    tuned = {shape for shape, _ in table.records}
    rows = []
    if args.batches:
        shapes = [p.name for p in drawn_batches(args.seed, args.batches)]
    else:
        shapes = draw(args.seed, args.draw) if args.draw else args.shapes.split(",") if args.shapes else SHAPES
    for text in shapes:
        problem = Problem.parse(text)
        if problem in tuned:
            print(f"{problem.name}: tuned, skipped")
            continue
        row = measure(problem, table, slug, arch)
        rows.append(row)
        x = row["x_cublas"]
        cublas = row["ms"]["cublas"]
        g = row["graph_ms"]["model"]
        print(f"{row['shape']:>16}  model {x['model']:5.2f}x  nearest {x['nearest']:5.2f}x  matmul {x['matmul']:5.2f}x"
              f"{' (cuBLAS)' if 'Cublas' in row['matmul'] else ''}  cuBLAS {cublas:.4f} ms"
              f"  model GPU-only {1e3 * g if g else math.nan:8.1f} us"
              f"  ({row['model_source']})", flush=True)  # fmt: skip
    for key in ("model", "nearest", "matmul"):
        xs = [r["x_cublas"][key] for r in rows]
        if xs:
            geo = statistics.geometric_mean(xs)
            print(f"{key}: geometric mean {geo:.3f}x cuBLAS, lowest {min(xs):.3f}x, {len(xs)} shapes")
    if args.out:
        write_rows(args.out, "untuned.py", results, slug, rows)
    return 0


def write_rows(path: Path, script: str, results, slug: str, rows: list) -> None:
    """A benchmark's rows as JSON, with the command, results folder, GPU and version they came from."""
    record = {"command": f"python benchmarks/{script} " + shlex.join(sys.argv[1:]), "results": str(results),
              "device": slug, "autotune": autotune.__version__, "rows": rows}  # fmt: skip
    path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
