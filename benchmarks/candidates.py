"""Every stored config the dispatch chooses among, timed at shapes nobody tuned: the data that
autotune/dispatch/model.py is fitted on (one set of shapes) and judged on (another).

    python benchmarks/candidates.py --out candidates.json                 # both sets below
    python benchmarks/candidates.py --sets fit --out fit.json
    python benchmarks/candidates.py --draw 24 --seed 57 --layouts --out d57.json  # in their layouts

For each shape: every candidate of the results table (each family's best at each tuned shape that
can run the shape and is meant for it, built for its layout: `table._Table._candidates`), compiled
in parallel first, then each timed by CUDA events around back-to-back launches on the same
operands after a warm-up (the median of ROUNDS rounds), and cupy.matmul (cuBLAS) the same way.
Each result is checked against float64 once. What the model predicted is not stored: it is
recomputed from the same results folder by whoever reads the file, for any version of the model.

The "score" set is benchmarks/untuned.py's; the "fit" set is other shapes over the same regimes,
so that the model's constants can be chosen on one and reported on the other; "check" is a third,
for a change of the model that was designed after looking at "score".
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CUPY_TF32", "0")

from untuned import SHAPES as SCORE_SHAPES
from untuned import draw, gpu_ms, write_rows

FIT_SHAPES = [
    "2500", "640", "160", "48", "5x4096x4096", "24x8192x4096", "100x4096x4096", "500x8192x2048",
    "4096x5x4096", "8192x24x4096", "4096x100x4096", "8192x500x2048", "192x192x24576",
    "1024x1024x32768", "3000x3000x48", "4096x4096x512", "3000x1500x6000", "1500x3000x6000",
    "20x20x20", "600x700x800",
    # Added with the check set: odd sizes, and row or column counts that no tile divides,
    # the regimes where the first 20 gave the model no choice to get wrong.
    "999", "1777", "385", "2500x1000x777", "8192x56x4096", "56x8192x4096", "4096x24x8192",
    "3000x40x3000", "40x3000x3000", "5000x200x3000", "200x5000x3000", "4096x500x1024", "800x8000x2000",
    "8000x800x2000", "1200x1200x12000", "333x333x33333", "2500x2500x100", "10x6000x6000",
    "6000x10x6000", "3500x2500x1500",
]  # fmt: skip
# A third set, added after the model had been judged on "score": shapes none
# of the model's design looked at, over the same regimes plus odd sizes and column or row counts
# that no tile divides, to report a change of the model on.
CHECK_SHAPES = [
    "1234", "3001", "513", "72", "16", "7x5000x3000", "20x8192x4096", "96x8192x8192", "300x6000x2000",
    "5000x7x3000", "6000x48x6000", "4096x300x2048", "2000x30x2000", "256x256x20000", "64x1000x50000",
    "1536x1536x16", "6000x6000x64", "3000x5000x1000", "700x9000x1500", "4000x1000x8000",
]  # fmt: skip
SETS = {"fit": FIT_SHAPES, "score": SCORE_SHAPES, "check": CHECK_SHAPES}
ROUNDS, WARMUP = 3, 2


def _compile(args: tuple) -> str:
    """In a worker process: the config's kernel into the on-disk compile cache."""
    family, params, arch = args
    from autotune.core.types import Config
    from autotune.gpu.compile import compile_source
    from autotune.kernels.family import Family
    from autotune.kernels.render import DEFAULT_KERNEL, render

    compile_source(render(Family.load(family).resolve(Config.make(family, params))), arch, DEFAULT_KERNEL)
    return family


def measure(cp, p, kernels: dict) -> tuple[dict, dict]:
    """({name: median ms}, {name: relative error}) of cuBLAS and each kernel at problem `p`."""
    rng = cp.random.default_rng(0)
    ta, tb = p.trans
    # Stored as the layout says; the kernels see op(A) and op(B) as views, as untuned.py's do.
    a = rng.random((p.K, p.M) if ta else (p.M, p.K), dtype=cp.float32) - 0.5
    b = rng.random((p.N, p.K) if tb else (p.K, p.N), dtype=cp.float32) - 0.5
    a, b = (a.T if ta else a), (b.T if tb else b)
    out = cp.empty((p.M, p.N), dtype=cp.float32)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    calls = {"cublas": lambda: cp.matmul(a, b, out=out)}
    calls |= {n: (lambda k=k: k(a, b, out)) for n, k in kernels.items()}
    ms, errors = {}, {}
    for name, fn in calls.items():
        fn()
        errors[name] = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
        est = max(gpu_ms(fn, 1), 1e-3)
        reps = int(min(100, max(1, 5 / est)))
        times = []
        for _ in range(ROUNDS):
            for _ in range(WARMUP if est < 1 else 0):
                fn()
            times.append(gpu_ms(fn, reps))
        ms[name] = statistics.median(times)
    return ms, errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=None, help="results folder (default: results_dir())")
    ap.add_argument("--sets", default="fit,score", help="comma list of: " + ", ".join(SETS))
    ap.add_argument("--draw", type=int, metavar="N", help="N shapes of untuned.py's seeded draw instead (as NN)")
    ap.add_argument("--layouts", action="store_true", help="with --draw: each shape in the draw's layout, not NN")
    ap.add_argument("--seed", type=int, default=57, help="the draw's seed (default 57)")
    ap.add_argument("--out", type=Path, required=True, help="write the timings as JSON here")
    args = ap.parse_args()
    if args.layouts and not args.draw:
        ap.error("--layouts goes with --draw")
    if args.draw:
        SETS["draw"] = [t if args.layouts else t.split("_")[0] for t in draw(args.seed, args.draw)]
        args.sets = "draw"

    import cupy as cp

    from autotune.core.types import Problem
    from autotune.dispatch import api
    from autotune.dispatch import table as dispatch_table

    results = args.results or dispatch_table.results_dir()
    os.environ["AUTOTUNE_RESULTS"] = str(results)
    dev = cp.cuda.Device().id
    slug, arch = api._device_props(dev)
    table = dispatch_table.table_for(results, slug)
    tuned = {shape for shape, _ in table.records}
    shapes = []
    for name in args.sets.split(","):
        if name not in SETS:
            sys.exit(f"unknown set {name!r} (known: {', '.join(SETS)})")
        shapes += [(name, Problem.parse(t)) for t in SETS[name]]
    shapes = [(s, p) for s, p in shapes if p not in tuned]

    configs = {}
    for _, p in shapes:
        for shape, fams in table._pool(p):
            for c in table._candidates(shape, fams, p, None):
                configs[c.what[2].name] = c.what[2]
    t0 = time.time()
    with ProcessPoolExecutor(min(16, os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile, [(c.family, c.as_dict(), arch) for c in configs.values()]))
    print(f"{len(configs)} configs compiled in {time.time() - t0:.0f} s", flush=True)
    kernels = {name: api._kernel(cfg, dev, arch, "candidate") for name, cfg in configs.items()}

    rows = []
    for set_name, p in shapes:
        names = sorted({c.what[2].name for s, f in table._pool(p) for c in table._candidates(s, f, p, None)})
        ms, errors = measure(cp, p, {n: kernels[n] for n in names})
        bad = sorted(n for n, e in errors.items() if not e < 1e-4)
        best = min((n for n in names if n not in bad), key=ms.get)
        rows.append({"set": set_name, "shape": p.name, "ms": ms, "errors": errors})
        print(f"{set_name:>5} {p.name:>16}  cuBLAS {ms['cublas']:.4f} ms  best of {len(names)}: "
              f"{ms['cublas'] / ms[best]:.2f}x ({best[:40]})" + (f"  WRONG: {bad}" if bad else ""),
              flush=True)  # fmt: skip
    write_rows(args.out, "candidates.py", results, slug, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
