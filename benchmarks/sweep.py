"""Tune a sweep of shapes and print the table: shape, winner, TFLOP/s, cuBLAS, ratio, error.

    python benchmarks/sweep.py                       # the ten shapes of the performance issue
    python benchmarks/sweep.py --shapes 4096,1000 --trials 40 --family warptile
    python benchmarks/sweep.py --set skinny --family fewrows fewcols  # few rows / few columns
    python benchmarks/sweep.py --set small --family all --trials 30   # every regime of small shapes
    python benchmarks/sweep.py --set small --family all --skip-tuned --copy-to $OUT/results  # resume
    python benchmarks/sweep.py --set layouts         # A @ B.T, A.T @ B, A.T @ B.T (shape_nt, ...)
    python benchmarks/sweep.py --set batches         # strided batches in one launch (shape_b64, ...)
    python benchmarks/sweep.py --precision high --family all   # a precision tier

Each shape is an ordinary `autotune search` (same studies, same results files), so the
winners land in results/<gpu>/ and `autotune export` / `check` work on them. cuBLAS is timed
in the same process, right after each family's top configs are re-timed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.cli.inputs import meant_for, runs_on
from autotune.core.types import PRECISIONS, Problem
from autotune.kernels.family import known_families
from autotune.kernels.space import Space
from autotune.records.results import record_path
from autotune.records.store import save_search
from autotune.search.driver import search
from autotune.search.evaluate import GPUEvaluator, default_jobs
from autotune.search.progress import Progress
from autotune.search.storage import default_storage

SETS = {
    "standard": [
        "1024", "2048", "4096", "8192", "1000", "3000", "4097", "8192x8192x1024", "1024x1024x8192", "4096x1024x4096",
    ],
    # Memory-bound: one operand streamed once (M or N <= 16); the mirrored pairs (Mx..., ...xN)
    # check that both orientations are served.
    "skinny": [
        "1x4096x4096", "1x11008x4096", "1x4096x11008", "2x4096x4096", "8x4096x4096", "16x4096x4096",
        "16x11008x4096", "1x3000x1000", "4096x1x4096", "11008x1x4096", "4096x8x4096", "4096x16x4096",
    ],
    # The small-shape issue's regimes, each tuned by the default search (--family all --trials 30):
    # few rows (1-16: memory-bound, one operand streamed once) and their mirror, 32-200 rows or
    # columns against large N and K, shallow K (4-64) under a large C, a deep K under a small C,
    # and tiny cubes (launch-bound).
    "small": [
        "1x4096x4096", "2x4096x4096", "8x4096x4096", "16x4096x4096", "32x4096x4096", "64x4096x4096",
        "128x4096x4096", "200x4096x4096", "1x11008x4096", "16x11008x4096", "128x11008x4096", "1x4096x11008",
        "32x4096x11008", "1x3000x1000", "8x3000x1000", "200x3000x1000", "4096x1x4096", "4096x8x4096",
        "4096x16x4096", "4096x32x4096", "4096x128x4096", "11008x1x4096", "4096x4096x4", "4096x4096x16",
        "4096x4096x64", "256x256x16384", "32x32x32", "64x64x64", "128x128x128",
    ],
    # Operands read in place in the other layouts (A @ B.T is a linear layer's), against cuBLAS
    # with the same transposes.
    "layouts": [
        "4096_nt", "4096_tn", "4096_tt", "8192x8192x1024_nt", "8192x8192x1024_tn", "8192x8192x1024_tt",
    ],
    # Strided batches in one launch, against cublasSgemmStridedBatched (and cupy.matmul on 3-D
    # arrays): the two, one in a linear layer's layout, and many small matrices.
    "batches": ["512_b64", "2048_b8", "512_nt_b64", "128_b512"],
}  # fmt: skip


def _parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=sorted(SETS), default="standard", help="a named set of shapes")
    ap.add_argument("--shapes", help="comma list of N or MxNxK (instead of --set)")
    ap.add_argument(
        "--family",
        nargs="+",
        default=["warptile"],
        help="families to tune (default warptile; 'all': every family); each shape gets those whose `suits` it meets",
    )
    ap.add_argument("--trials", type=int, default=40, help="configs measured per family and shape")
    ap.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="highest",
        help="accuracy tier (search --precision); below highest each row also gives the ratios to FP32 and "
        "TF32 cuBLAS and the winner's errors on the contract's inputs",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--out", type=Path, help="write the table as JSON here")
    ap.add_argument(
        "--skip-tuned", action="store_true", help="leave out shapes this GPU already has a record of (resume a set)"
    )
    ap.add_argument(
        "--copy-to",
        type=Path,
        metavar="DIR",
        help="copy each shape's record here as soon as it is written (a lent machine's call may be cut off)",
    )
    return ap.parse_args()


def _print_table(rows: list[dict]) -> float:
    """The Markdown table of the rows; returns the geometric mean of their ratios."""
    ratios = [r["ratio"] for r in rows if r.get("family")]
    geo = statistics.geometric_mean(ratios) if ratios else float("nan")
    print("\n| shape (MxNxK) | winner | params | TFLOP/s | cuBLAS TFLOP/s | ratio | GB/s | cuBLAS GB/s | rel. error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not r.get("family"):
            print(f"| {r['shape']} | none correct | | | | | | | |")
            continue
        params = " ".join(f"{k}={v}" for k, v in sorted(r["params"].items()))
        print(
            f"| {r['shape']} | {r['family']} | {params} | {r['tflops']:.1f} | {r['cublas_tflops']:.1f} | "
            f"{r['ratio']:.2f}x | {r['gbps']:.0f} | {r['cublas_gbps']:.0f} | {r['error']:.1e} |"
        )
    lowest = f"{min(ratios):.3f}x" if ratios else "-"
    print(f"\ngeometric mean {geo:.3f}x cuBLAS, lowest {lowest}, {len(ratios)}/{len(rows)} shapes verified correct")
    return geo


def main() -> int:
    args = _parse_args()
    ev = GPUEvaluator(0, seed=args.seed, jobs=default_jobs())
    names = known_families() if args.family == ["all"] else args.family
    all_spaces = [Space.load(f) for f in names]
    storage = default_storage(args.results, ev.limits.slug)
    command = "python benchmarks/sweep.py " + shlex.join(sys.argv[1:])
    rows = []
    t_all = time.monotonic()
    for shape in args.shapes.split(",") if args.shapes else SETS[args.set]:
        problem = Problem.parse(shape, precision=args.precision)
        if args.skip_tuned and record_path(args.results, ev.limits.slug, problem).exists():
            print(f"{problem.name:>16}  tuned already (--skip-tuned)", flush=True)
            continue
        # A sweep keeps each family to its shapes, and to GPUs it runs on (wgmma_tf32: sm_90).
        spaces = runs_on(meant_for(all_spaces, problem, named=False), ev.limits, named=False)
        if not spaces:
            rows.append({"shape": problem.name, "family": None})
            print(f"{problem.name:>16}  none of {' '.join(names)} is meant for this shape", flush=True)
            continue
        t0 = time.monotonic()
        results = search(
            spaces,
            problem,
            ev,
            gpu_slug=ev.limits.slug,
            storage=storage,
            trials=args.trials,
            seed=args.seed,
            progress=Progress(enabled=False),
        )
        save_search(
            args.results,
            ev.limits,
            ev.versions,
            problem,
            results,
            command=command,
            sampler="tpe",
            seed=args.seed,
            trials=args.trials,
            storage=storage,
        )
        written = record_path(args.results, ev.limits.slug, problem)
        if args.copy_to and written.exists():  # none when no config was correct
            args.copy_to.mkdir(parents=True, exist_ok=True)
            shutil.copy2(written, args.copy_to)
        ok = [r for r in results if r.best is not None]
        if not ok:
            rows.append({"shape": problem.name, "family": None})
            print(f"{problem.name:>16}  no correct config", flush=True)
            continue
        win = max(ok, key=lambda r: r.best.gflops)
        m = win.best
        row = {
            "shape": problem.name,
            "family": win.family,
            "params": m.config.as_dict(),
            "tflops": m.gflops / 1e3,
            "cublas_tflops": win.cublas["gflops"] / 1e3,
            "ratio": m.extra["ratio"],
            "error": m.error,
            "time_ms": m.time_ms,
            "cublas_time_ms": win.cublas["time_ms"],
            # Effective bandwidth: each operand read once and C written once.
            "gbps": problem.bytes / (m.time_ms * 1e6),
            "cublas_gbps": problem.bytes / (win.cublas["time_ms"] * 1e6),
            "seconds": round(time.monotonic() - t0, 1),
        }
        paths = win.cublas.get("paths", {})
        if "gemm_tf32" in paths:  # a tensor-core tier: against both cuBLAS paths, and its errors
            fp32 = min(t for p, t in paths.items() if p != "gemm_tf32")
            row["x_sgemm"], row["x_tf32"] = fp32 / m.time_ms, paths["gemm_tf32"] / m.time_ms
            row["contract"] = m.extra.get("contract")
        rows.append(row)
        print(
            f"{problem.name:>16}  {row['tflops']:6.1f} TFLOP/s  cuBLAS {row['cublas_tflops']:6.1f}  "
            f"{row['ratio']:5.2f}x  {row['gbps']:6.0f} GB/s (cuBLAS {row['cublas_gbps']:.0f})  "
            f"err {row['error']:.1e}  {row['seconds']:5.1f}s  {m.config.name}",
            flush=True,
        )
        if "x_sgemm" in row:
            errs = "  ".join(
                f"{c['kind']} {c['errors'][0]:.2g}/{c['errors'][1]:.2g} "
                f"(cuBLAS {c['cublas'][0]:.2g}/{c['cublas'][1]:.2g})"
                for c in row["contract"] or []
            )
            print(f"{'':>16}  {row['x_sgemm']:.2f}x SGEMM, {row['x_tf32']:.2f}x TF32 cuBLAS; max/median errors {errs}")
    ev.close()
    geo = _print_table(rows)
    print(f"{time.monotonic() - t_all:.0f} s, {ev.limits.name}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "gpu": ev.limits.name,
                    "versions": ev.versions,
                    "rows": rows,
                    "geomean_ratio": geo,
                    "command": command,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
