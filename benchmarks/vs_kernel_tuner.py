"""autotune vs Kernel Tuner: the same template, the same space, the same number of evaluations.

    python benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 3 --out kt.json

Both tune `templates/vectorized.cu.j2` over one space (below) at SIZE^3 on this GPU. Kernel
Tuner (its CuPy backend) gets the template as a code generator, our constraints as its
restriction function and a reference answer to verify against; autotune runs its ordinary
search (TPE, no seeds). autotune's grid over the whole space gives the optimum. Each tool's
best config is then re-timed by one method (autotune's evaluator) and compared to that optimum,
so the fraction of optimum does not depend on either tool's timer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.evaluate import GPUEvaluator, default_jobs
from autotune.render import DEFAULT_KERNEL, render
from autotune.search import search_family
from autotune.space import Family, Space
from autotune.studies import default_storage
from autotune.types import Config, Problem

SPACE = {"BM": [32, 64, 128, 256], "BN": [32, 64, 128, 256], "BK": [8, 16, 32], "TM": [4, 8, 16], "TN": [4, 8]}
# Kernel Tuner's strategies with the best fraction of the optimum by replay (vs_kernel_tuner_replay.py,
# run 21's landscape), and its classic simulated annealing and random sample.
KT_STRATEGIES = ["hybrid_vndx", "diff_evo", "simulated_annealing", "random_sample"]


def kt_space(fam: Family, space: Space, limits) -> tuple[dict, Callable[[dict], bool]]:
    """Kernel Tuner's tunables and restriction for `space`: its block size must be a tunable,
    so THREADS is one, pinned to the family's by the restriction with our constraints."""
    params = dict(space.values)
    params["THREADS"] = sorted({fam.derive(c.as_dict())["THREADS"] for c in space.enumerate(limits).valid})

    def restrict(p):
        cfg = {k: p[k] for k in fam.params}
        return p["THREADS"] == fam.derive(cfg)["THREADS"] and not fam.violations(Config.make(fam.name, cfg), limits)

    return params, restrict


def run_kernel_tuner(
    fam: Family, space: Space, limits, problem: Problem, strategy: str, fevals: int, seed: int, cache: str | None = None
):
    import kernel_tuner

    M, N, K = problem.M, problem.N, problem.K
    rng = np.random.default_rng(seed)
    A = rng.random((M, K), dtype=np.float32) * 2 - 1
    B = rng.random((K, N), dtype=np.float32) * 2 - 1
    C = np.zeros((M, N), np.float32)
    ref = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    params, restrict = kt_space(fam, space, limits)

    def source(p):
        return render(fam.resolve({k: p[k] for k in fam.params}), DEFAULT_KERNEL)

    args = [np.int32(M), np.int32(N), np.int32(K), np.float32(1.0), A, B, np.float32(0.0), C]
    cache_dir = tempfile.mkdtemp()
    cold_cupy_cache(cache_dir)  # as cold as autotune's: the brute force compiled every point
    t0 = time.perf_counter()
    results, env = kernel_tuner.tune_kernel(
        DEFAULT_KERNEL,
        source,
        (N, M),
        args,
        params,
        lang="cupy",
        block_size_names=["THREADS"],
        grid_div_x=["BN"],
        grid_div_y=["BM"],
        restrictions=restrict,
        answer=[None] * 7 + [ref],
        atol=1e-2,
        strategy=strategy,
        defines={},
        strategy_options={"max_fevals": fevals} if fevals else {},
        iterations=7,
        verbose=False,
        quiet=True,
        cache=cache,
        simulation_mode=False,
    )
    wall = time.perf_counter() - t0
    shutil.rmtree(cache_dir, ignore_errors=True)
    trace, best = [], 0.0
    for r in results:
        t = r.get("time")
        if isinstance(t, (int, float)) and t > 0:
            best = max(best, problem.flops / (t * 1e6))
        trace.append(best)
    ok = [r for r in results if isinstance(r.get("time"), (int, float))]
    top = min(ok, key=lambda r: r["time"])
    distinct = len({tuple(r[k] for k in fam.params) for r in results})
    return {
        "wall_s": wall,
        "evaluations": len(results),
        "distinct": distinct,
        "trace_gflops": trace,
        "best": {k: int(top[k]) for k in fam.params},
    }


class Breakdown:
    """Where autotune's wall time goes: waiting for compiles, GPU calls, and the rest (Optuna,
    storage, Python), by wrapping the evaluator's methods for the length of one search.
    compile_busy_s adds up the compiles' own times over all threads (it exceeds the wall time
    when they overlap)."""

    def __init__(self, ev: GPUEvaluator):
        self.ev, self.t = ev, {"wait_compile_s": 0.0, "gpu_calls_s": 0.0, "compile_busy_s": 0.0}

    def _timed(self, key, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.t[key] += time.perf_counter() - t0

        return wrapper

    def __enter__(self):
        import autotune.gpu.compile as comp

        self._saved = (self.ev.first_ready, self.ev._prepare, self.ev.worker.call, comp.compile_many)
        self.ev.first_ready = self._timed("wait_compile_s", self.ev.first_ready)
        self.ev._prepare = self._timed("wait_compile_s", self.ev._prepare)
        self.ev.worker.call = self._timed("gpu_calls_s", self.ev.worker.call)
        comp.compile_many = self._timed("compile_busy_s", comp.compile_many)
        return self

    def __exit__(self, *exc):
        import autotune.gpu.compile as comp

        self.ev.first_ready, self.ev._prepare, self.ev.worker.call, comp.compile_many = self._saved
        return False


def run_autotune(
    ev: GPUEvaluator, space: Space, problem: Problem, slug: str, fevals: int, rep: int, window: int | None, remeasure
) -> dict:
    """One search as `autotune search` runs it (no seeds; no final re-time, which Kernel Tuner
    has no counterpart for), with a cold compile cache and an empty study."""
    trace, best, statuses = [], [0.0, None], []

    def on_trial(m):
        statuses.append(m.status.value)
        if not m.ok and m.status.value != "rejected":
            print(f"  autotune trial {m.status.value}: {m.config.name}: {m.message[:200]}", flush=True)
        if m.ok and m.gflops > best[0]:
            best[0], best[1] = m.gflops, m.config.as_dict()
        trace.append(best[0])

    with tempfile.TemporaryDirectory() as d:
        os.environ["AUTOTUNE_CACHE"] = str(Path(d) / "nvrtc")
        t0 = time.perf_counter()
        with Breakdown(ev) as bd:
            search_family(
                space,
                problem,
                ev,
                gpu_slug=slug,
                storage=default_storage(d, slug),
                trials=fevals,
                seed=rep,
                retime_top=0,
                on_trial=on_trial,
                **({"batch": window} if window else {}),
            )
        wall = time.perf_counter() - t0
    # The main thread waits for compiles inside _prepare and for the GPU inside the calls.
    bd.t["other_s"] = wall - bd.t["wait_compile_s"] - bd.t["gpu_calls_s"]
    strategy = "tpe" + (f" (window {window})" if window else "")
    run = {
        "tool": "autotune",
        "strategy": strategy,
        "repeat": rep,
        "wall_s": wall,
        "evaluations": len(trace),
        "trace_gflops": trace,
        "best": best[1],
        "breakdown": bd.t,
        "ran_on_gpu": sum(1 for st in statuses if st not in ("rejected", "compile_failed")),
    }
    run["fraction_of_optimum"] = remeasure(best[1]) if best[1] else 0.0
    print(
        f"autotune {strategy:<19} rep {rep}: {len(trace):3d} evals {wall:6.1f} s  fraction "
        f"{run['fraction_of_optimum']:.3f}  (" + ", ".join(f"{k} {v:.2f}" for k, v in bd.t.items()) + ")",
        flush=True,
    )
    return run


def cold_cupy_cache(directory: str) -> None:
    """Point CuPy's kernel cache (Kernel Tuner's compiles) at an empty directory: CuPy reads
    CUPY_CACHE_DIR once, at import, so the cache backend is replaced."""
    from cupy.cuda import _compiler_cache, compiler

    compiler._set_kernel_cache_backend(_compiler_cache.DiskKernelCacheBackend(directory))


def main() -> int:  # noqa: PLR0915 - one script in order: both tools, the same space, one table
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--fevals", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--strategies", default=",".join(KT_STRATEGIES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--landscape", type=Path, help="write every brute-force measurement here (JSON)")
    ap.add_argument(
        "--kt-cache",
        help="first run Kernel Tuner's brute force over the space into this cache file "
        "(for its simulation mode: strategies replayed offline)",
    )
    ap.add_argument(
        "--optimum-from",
        type=Path,
        metavar="LANDSCAPE",
        help="skip the brute force: the optimum is the best re-timed config of an earlier --landscape "
        "(re-timed again here)",
    )
    ap.add_argument("--windows", default="", help="autotune trials in flight, e.g. 4,8 (default: its default)")
    args = ap.parse_args()

    problem = Problem(args.size, args.size, args.size)
    fam = Family.load("vectorized")
    space = Space.from_dict(fam, {"space": SPACE}, "benchmarks/vs_kernel_tuner.py SPACE")
    ev = GPUEvaluator(0, jobs=default_jobs())
    slug = ev.limits.slug
    valid = space.enumerate(ev.limits).valid
    print(f"{ev.limits.name}: {problem.name}, vectorized, {len(valid)} valid points of {space.size}", flush=True)

    if args.optimum_from:
        # The optimum of an earlier brute force on this GPU, its top 5 re-timed in this process.
        old = json.loads(args.optimum_from.read_text())
        brute_s, ms = None, []
        top = ev.evaluate([Config.make(fam.name, m["config"]["params"]) for m in old["retimed"]], problem, retime=True)
        top = sorted(top, key=lambda m: -(m.gflops or 0))
        print(f"optimum from {args.optimum_from}: {top[0].config.name}", flush=True)
    else:
        # The optimum: every point once (autotune grid), then the top 5 re-timed.
        t0 = time.perf_counter()
        ms = ev.evaluate(valid, problem)
        brute_s = time.perf_counter() - t0
        top = sorted((m for m in ms if m.ok), key=lambda m: -m.gflops)[:5]
        top = sorted(ev.evaluate([m.config for m in top], problem, retime=True), key=lambda m: -(m.gflops or 0))
        print(f"brute force: {len(valid)} points in {brute_s:.1f} s ({brute_s / len(valid):.2f} s/point)", flush=True)
    optimum = top[0]
    cublas = ev.baseline(problem)
    print(f"optimum {optimum.gflops:.0f} GFLOP/s ({optimum.config.name}); cuBLAS {cublas['gflops']:.0f}", flush=True)
    if args.landscape and ms:
        args.landscape.parent.mkdir(parents=True, exist_ok=True)
        args.landscape.write_text(
            json.dumps(
                {
                    "gpu": ev.limits.name,
                    "problem": problem.name,
                    "space": SPACE,
                    "cublas": cublas,
                    "measurements": [m.to_dict() for m in ms],
                    "retimed": [m.to_dict() for m in top],
                },
                indent=1,
                default=str,
            )
        )
    if args.kt_cache:
        t0 = time.perf_counter()
        run_kernel_tuner(fam, space, ev.limits, problem, "brute_force", 0, 0, cache=args.kt_cache)
        print(f"kernel_tuner brute force into {args.kt_cache}: {time.perf_counter() - t0:.1f} s", flush=True)

    def remeasure(params, own_gflops=None):
        (m,) = ev.evaluate([Config.make("vectorized", params)], problem, retime=True)
        if m.status.value == "rejected" and own_gflops:
            # Kernel Tuner runs configs autotune's filter rejects (spills): scored by its own timing.
            print(f"  {m.config.name}: {m.message}; scored by Kernel Tuner's own timing", flush=True)
            return own_gflops / optimum.gflops
        return (m.gflops or 0.0) / optimum.gflops

    runs = []
    for rep in range(args.repeats):
        for window in [int(w) for w in args.windows.split(",") if w] or [None]:
            runs.append(run_autotune(ev, space, problem, slug, args.fevals, rep, window, remeasure))
        for strategy in args.strategies.split(","):
            try:
                r = run_kernel_tuner(fam, space, ev.limits, problem, strategy, args.fevals, rep)
            except Exception as exc:  # noqa: BLE001 - report the strategy that broke, go on
                print(f"kernel_tuner {strategy} rep {rep}: failed: {type(exc).__name__}: {exc}", flush=True)
                continue
            r.update(tool="kernel_tuner", strategy=strategy, repeat=rep)
            r["fraction_of_optimum"] = remeasure(r["best"], r["trace_gflops"][-1])
            runs.append(r)
            print(
                f"kernel_tuner {strategy:<19} rep {rep}: {r['evaluations']:3d} evals {r['wall_s']:6.1f} s  "
                f"fraction {r['fraction_of_optimum']:.3f}",
                flush=True,
            )
    ev.close()

    # Summary per (tool, strategy): mean fraction of optimum, mean wall time, wall time per evaluation.
    groups = {}
    for r in runs:
        groups.setdefault((r["tool"], r["strategy"]), []).append(r)
    print(
        "\n| tool | strategy | evaluations | fraction of optimum (mean, min) | wall time s (mean) | s per evaluation |"
    )
    print("|---|---|---|---|---|---|")
    summary = []
    for (tool, strat), rs in groups.items():
        frac = [r["fraction_of_optimum"] for r in rs]
        wall = [r["wall_s"] for r in rs]
        evals = [r["evaluations"] for r in rs]
        row = {
            "tool": tool,
            "strategy": strat,
            "fraction_mean": float(np.mean(frac)),
            "fraction_min": float(min(frac)),
            "wall_mean_s": float(np.mean(wall)),
            "s_per_eval": float(np.sum(wall) / max(1, np.sum(evals))),
            "evaluations_mean": float(np.mean(evals)),
        }
        summary.append(row)
        print(
            f"| {tool} | {strat} | {row['evaluations_mean']:.0f} | "
            f"{row['fraction_mean']:.3f}, {row['fraction_min']:.3f} | "
            f"{row['wall_mean_s']:.1f} | {row['s_per_eval']:.2f} |"
        )
    print(f"\noptimum {optimum.gflops:.0f} GFLOP/s ({optimum.config.name}) by brute force over {len(valid)} points")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "gpu": ev.limits.name,
                    "problem": problem.name,
                    "space": SPACE,
                    "valid_points": len(valid),
                    "brute_force_s": brute_s,
                    "optimum": optimum.to_dict(),
                    "cublas": cublas,
                    "runs": runs,
                    "summary": summary,
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
