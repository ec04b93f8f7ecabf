"""autotune vs Kernel Tuner: the same template, the same space, the same number of evaluations.

    python benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 3 --out kt.json
    python benchmarks/vs_kernel_tuner.py --family warptile --size 4096 --fevals 30 --repeats 3 \
        --strategies hybrid_vndx,random_sample --out kt_warptile.json

Both tune one template over one space at SIZE^3 on this GPU. Kernel Tuner (its CuPy backend)
gets the template as a code generator, our constraints as its restriction function and a
reference answer to verify against; autotune runs its ordinary search (TPE, no seeds). Each
tool's best config is then re-timed by one method (autotune's evaluator) and divided by the
optimum, so the fraction of optimum does not depend on either tool's timer.

vectorized: the 288-point space below (182 valid); the optimum is the best of a brute force.
warptile: the part of configs/warptile.yaml that Kernel Tuner can launch -- one kernel and no
workspace, so the data_parallel schedule without split-K (75,348 valid points at 4096^3 on the
H100); the optimum is the best ever measured: every run's pick and the shipped seeds of that
part (with --optimum-from, an earlier run's re-timed configs too), all re-timed in this
process at the end. Kernel
Tuner's CuPy backend passes a kernel's dynamic shared memory without raising CUDA's 48 KB
default cap, which would fail every config of more (most of warptile's best ones): a shim sets
`max_dynamic_shared_size_bytes` before each launch, as autotune's runner does (and another lets
the backend start on a GPU whose UUID holds a zero byte: patch_kernel_tuner).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Config, Problem
from autotune.gpu.compile import OPTIONS
from autotune.kernels.family import Family
from autotune.kernels.render import DEFAULT_KERNEL, render
from autotune.kernels.space import Space
from autotune.search.driver import search_family
from autotune.search.evaluate import GPUEvaluator, default_jobs
from autotune.search.storage import default_storage

SPACE = {"BM": [32, 64, 128, 256], "BN": [32, 64, 128, 256], "BK": [8, 16, 32], "TM": [4, 8, 16], "TN": [4, 8]}
# warptile's values pinned to what one Kernel Tuner launch can run (see the docstring).
WARPTILE_PINS = {"SCHEDULE": ["data_parallel"], "SPLITK": [1], "PACKB": [1]}
# autotune's NVRTC options but ptxas's report (CuPy names the target itself).
KT_OPTIONS = tuple(o for o in OPTIONS if not o.startswith("-Xptxas"))
# Kernel Tuner's strategies with the best fraction of the optimum by replay (vs_kernel_tuner_replay.py,
# in git at 3168ff9; the recorded 4096^3 landscape), and its classic simulated annealing and random sample.
KT_STRATEGIES = ["hybrid_vndx", "diff_evo", "simulated_annealing", "random_sample"]


def compared_space(family: str) -> tuple[Space, list[Config]]:
    """The space both tools search (no seeds: both start cold) and the configs of it known to be
    good (the family's shipped seeds that lie in it), which only join the optimum's candidates."""
    if family == "vectorized":
        return Space.from_dict(Family.load(family), {"space": SPACE}, "benchmarks/vs_kernel_tuner.py SPACE"), []
    shipped = Space.load(family)
    values = {**shipped.values, **WARPTILE_PINS}
    known = [c for c in shipped.seeds if all(c[p] in v for p, v in values.items())]
    space = dataclasses.replace(shipped, values=values, seeds=[], source=f"{shipped.source} with {WARPTILE_PINS}")
    return space, known


def kt_space(fam: Family, space: Space, limits) -> tuple[dict, Callable[[dict], bool]]:
    """Kernel Tuner's tunables and restriction for `space`: its block size must be a tunable,
    so THREADS is one. The restriction is our constraints' answer, looked up: the valid points
    (THREADS included) as autotune enumerates them, so that a space of a million combinations
    costs Kernel Tuner a set lookup each and not a run of our expression evaluator."""
    names = list(fam.params)
    valid = {(*(c[k] for k in names), fam.derive(c.as_dict())["THREADS"]) for c in space.enumerate(limits).valid}
    params = dict(space.values)
    params["THREADS"] = sorted({v[-1] for v in valid})

    def restrict(p):
        return (*(p[k] for k in names), p["THREADS"]) in valid

    return params, restrict


class OneLaunch:
    """A config's launch at one shape as Kernel Tuner must be told it: the SGEMM kernel alone
    (no helper or tail kernel, no workspace in use), its grid and its dynamic shared memory,
    from the family's own launch plan. `launchable` says whether a config's launch is that."""

    def __init__(self, fam: Family, problem: Problem, limits):
        self.fam, self.problem, self.limits = fam, problem, limits
        self._geometry: dict[tuple, object] = {}

    def geometry(self, params: dict):
        key = tuple(params[k] for k in self.fam.params)
        if key not in self._geometry:
            plan = self.fam.resolve({k: params[k] for k in self.fam.params}).plan
            p, slots = self.problem, self.limits.sm_count
            # Two device sizes: a grid that depends on resident blocks is a persistent schedule.
            self._geometry[key] = [plan.geometry(p.M, p.N, p.K, slots * n) for n in (1, 2)]
        return self._geometry[key]

    def launchable(self, params: dict) -> bool:
        one, two = self.geometry(params)
        return (
            one.kernels == [""]
            and one.grid == two.grid
            and one.values.get("ws_bytes", 0) == 0
            and not one.values.get("tail_tiles", 0)
        )

    def grid(self, params: dict) -> tuple[int, int, int]:
        return self.geometry(params)[0].grid

    def smem(self, params: dict) -> int:
        return self.geometry(params)[0].dynamic_smem

    def has_workspace(self, params: dict) -> bool:
        return self.geometry(params)[0].has_workspace


def patch_kernel_tuner() -> None:
    """Two mends to Kernel Tuner's CuPy backend (1.5.0), neither touching what it tunes or times.

    Its launches pass the dynamic shared memory size but leave CUDA's default cap of 48 KB on
    the kernel: the cap is raised to that size before each launch, as autotune's runner does.
    It labels the device with `uuid.UUID(bytes=props["uuid"])`, but CuPy returns the UUID as a
    C string, cut at its first zero byte, so on a GPU whose UUID holds one the backend cannot
    start: the label is padded back to 16 bytes."""
    import uuid

    import kernel_tuner.backends.cupy as kt_cupy

    if getattr(kt_cupy.CupyFunctions.run_kernel, "raises_smem_cap", False):
        return
    launch = kt_cupy.CupyFunctions.run_kernel

    def run_kernel(self, func, gpu_args, threads, grid, stream=None):
        if self.smem_size > 48 * 1024:
            func.max_dynamic_shared_size_bytes = self.smem_size
        return launch(self, func, gpu_args, threads, grid, stream)

    run_kernel.raises_smem_cap = True
    kt_cupy.CupyFunctions.run_kernel = run_kernel

    class PaddedUUID:
        @staticmethod
        def UUID(bytes):  # stands in for the uuid module's class
            return uuid.UUID(bytes=bytes.ljust(16, b"\0")[:16])

    kt_cupy.uuid = PaddedUUID


def run_kernel_tuner(
    fam: Family, space: Space, limits, problem: Problem, strategy: str, fevals: int, seed: int, cache: str | None = None
):
    import kernel_tuner

    patch_kernel_tuner()
    M, N, K = problem.M, problem.N, problem.K
    rng = np.random.default_rng(seed)
    A = rng.random((M, K), dtype=np.float32) * 2 - 1
    B = rng.random((K, N), dtype=np.float32) * 2 - 1
    C = np.zeros((M, N), np.float32)
    ref = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    params, restrict = kt_space(fam, space, limits)
    one = OneLaunch(fam, problem, limits)
    ws = one.has_workspace(space.enumerate(limits).valid[0].as_dict())  # the family's signature

    def source(p):
        return render(fam.resolve({k: p[k] for k in fam.params}), DEFAULT_KERNEL)

    # The kernel's arguments: (M, N, K, alpha, A, lda, B, ldb, beta, C, ldc[, workspace]).
    args = [np.int32(M), np.int32(N), np.int32(K), np.float32(1.0), A, np.int32(K), B, np.int32(N), np.float32(0.0)]
    args += [C, np.int32(N)] + ([np.zeros(4, np.float32)] if ws else [])
    answer = [None] * len(args)
    answer[9] = ref
    random.seed(seed)
    np.random.seed(seed)  # Kernel Tuner's strategies draw from the global generators
    cache_dir = tempfile.mkdtemp()
    cold_cupy_cache(cache_dir)  # as cold as autotune's: a fresh compile cache each run
    t0 = time.perf_counter()
    results, env = kernel_tuner.tune_kernel(
        DEFAULT_KERNEL,
        source,
        one.grid,  # the grid itself (no divisors below)
        args,
        params,
        lang="cupy",
        compiler_options=list(KT_OPTIONS),
        block_size_names=["THREADS"],
        grid_div_x=[],  # Kernel Tuner's way to say the grid is the problem size itself
        grid_div_y=[],
        grid_div_z=[],
        smem_args={"size": lambda p: one.smem(p)},
        restrictions=restrict,
        answer=answer,
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
    phases = {
        k: sum(r.get(k, 0) or 0 for r in results) / 1000
        for k in ("compile_time", "verification_time", "benchmark_time")
    }
    return {
        "wall_s": wall,
        "evaluations": len(results),
        "distinct": distinct,
        "trace_gflops": trace,
        "best": {k: top[k] for k in fam.params},
        "own_best_gflops": best,
        "phases_s": phases,
        "failed": sum(1 for r in results if not isinstance(r.get("time"), (int, float))),
    }


class Breakdown:
    """Where autotune's wall time goes: waiting for compiles, GPU calls, and the rest (Optuna,
    storage, Python), by wrapping the evaluator's methods for the length of one search.
    compile_busy_s adds up the compiles' own times over all threads (it exceeds the wall time
    when they overlap). `each` keeps every compile's and every GPU call's seconds: the per-config
    costs a scaling simulation (benchmarks/scaling.py) draws from."""

    def __init__(self, ev: GPUEvaluator):
        self.ev, self.t = ev, {"wait_compile_s": 0.0, "gpu_calls_s": 0.0, "compile_busy_s": 0.0}
        self.each: dict[str, list[float]] = {"compile_s": [], "gpu_call_s": []}

    def _timed(self, key, fn, each: str | None = None):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                out = fn(*a, **kw)
            finally:
                self.t[key] += time.perf_counter() - t0
            if each == "gpu_call_s":
                self.each[each].append(time.perf_counter() - t0)
            elif each == "compile_s":
                self.each[each] += [c.compile_s for c in out if not getattr(c, "cached", True)]
            return out

        return wrapper

    def __enter__(self):
        import autotune.gpu.compile as comp

        self._saved = (self.ev.first_ready, self.ev._prepare, self.ev.worker.call, comp.compile_many)
        self.ev.first_ready = self._timed("wait_compile_s", self.ev.first_ready)
        self.ev._prepare = self._timed("wait_compile_s", self.ev._prepare)
        self.ev.worker.call = self._timed("gpu_calls_s", self.ev.worker.call, "gpu_call_s")
        comp.compile_many = self._timed("compile_busy_s", comp.compile_many, "compile_s")
        return self

    def __exit__(self, *exc):
        import autotune.gpu.compile as comp

        self.ev.first_ready, self.ev._prepare, self.ev.worker.call, comp.compile_many = self._saved
        return False


def run_autotune(
    ev: GPUEvaluator, space: Space, problem: Problem, slug: str, fevals: int, rep: int, window: int | None
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
        "own_best_gflops": best[0],
        "breakdown": bd.t,
        "each": bd.each,
        "ran_on_gpu": sum(1 for st in statuses if st not in ("rejected", "compile_failed")),
    }
    print(
        f"autotune {strategy:<19} rep {rep}: {len(trace):3d} evals {wall:6.1f} s  own best {best[0]:.0f} GFLOP/s  ("
        + ", ".join(f"{k} {v:.2f}" for k, v in bd.t.items())
        + ")",
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
    ap.add_argument("--family", choices=["vectorized", "warptile"], default="vectorized")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--fevals", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--first-repeat", type=int, default=0, help="sampler seed of the first repeat (split a study over runs)"
    )
    ap.add_argument("--strategies", default=",".join(KT_STRATEGIES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--landscape", type=Path, help="vectorized: write every brute-force measurement here (JSON)")
    ap.add_argument(
        "--kt-cache",
        help="vectorized: first run Kernel Tuner's brute force over the space into this cache file "
        "(for its simulation mode: strategies replayed offline)",
    )
    ap.add_argument(
        "--optimum-from",
        type=Path,
        metavar="JSON",
        help="add the configs re-timed by an earlier run (its --landscape or --out) to the optimum's "
        "candidates, re-timed again here (vectorized: instead of the brute force)",
    )
    ap.add_argument("--windows", default="", help="autotune trials in flight, e.g. 4,8 (default: its default)")
    args = ap.parse_args()

    problem = Problem(args.size, args.size, args.size)
    space, known = compared_space(args.family)
    fam = space.family
    ev = GPUEvaluator(0, jobs=default_jobs())
    slug = ev.limits.slug
    valid = space.enumerate(ev.limits).valid
    print(f"{ev.limits.name}: {problem.name}, {fam.name}, {len(valid)} valid points of {space.size}", flush=True)
    one = OneLaunch(fam, problem, ev.limits)
    sample = random.Random(0).sample(valid, min(len(valid), 2000))
    if not all(one.launchable(c.as_dict()) for c in sample):
        raise SystemExit(f"{space.source}: some valid points need more than one kernel launch")

    # The optimum's candidates: configs known to be good, an earlier run's re-timed ones, and
    # (vectorized, without --optimum-from) the top of a brute force over the whole space.
    candidates = list(known)
    brute_s, ms = None, []
    if args.optimum_from:
        old = json.loads(args.optimum_from.read_text())
        candidates += [Config.make(fam.name, m["config"]["params"]) for m in old["retimed"]]
    elif args.family == "vectorized":
        t0 = time.perf_counter()
        ms = ev.evaluate(valid, problem)
        brute_s = time.perf_counter() - t0
        candidates += [m.config for m in sorted((m for m in ms if m.ok), key=lambda m: -m.gflops)[:5]]
        print(f"brute force: {len(valid)} points in {brute_s:.1f} s ({brute_s / len(valid):.2f} s/point)", flush=True)
    if args.kt_cache:
        t0 = time.perf_counter()
        run_kernel_tuner(fam, space, ev.limits, problem, "brute_force", 0, 0, cache=args.kt_cache)
        print(f"kernel_tuner brute force into {args.kt_cache}: {time.perf_counter() - t0:.1f} s", flush=True)

    runs = []
    for rep in range(args.first_repeat, args.first_repeat + args.repeats):
        for window in [int(w) for w in args.windows.split(",") if w] or [None]:
            runs.append(run_autotune(ev, space, problem, slug, args.fevals, rep, window))
        for strategy in args.strategies.split(","):
            try:
                r = run_kernel_tuner(fam, space, ev.limits, problem, strategy, args.fevals, rep)
            except Exception as exc:  # noqa: BLE001 - report the strategy that broke, go on
                print(f"kernel_tuner {strategy} rep {rep}: failed: {type(exc).__name__}: {exc}", flush=True)
                traceback.print_exc()
                continue
            r.update(tool="kernel_tuner", strategy=strategy, repeat=rep)
            runs.append(r)
            print(
                f"kernel_tuner {strategy:<19} rep {rep}: {r['evaluations']:3d} evals {r['wall_s']:6.1f} s  own best "
                f"{r['own_best_gflops']:.0f} GFLOP/s  failed {r['failed']}  ("
                + ", ".join(f"{k} {v:.2f}" for k, v in r["phases_s"].items())
                + ")",
                flush=True,
            )

    # Every pick and every candidate re-timed by one method, in this process, back to back; the
    # optimum is the best of them (vectorized: the brute force's best is among them).
    picks = [Config.make(fam.name, r["best"]) for r in runs if r["best"]]
    retimed = ev.evaluate(list(dict.fromkeys(candidates + picks)), problem, retime=True)
    by_name = {m.config.name: m for m in retimed}
    optimum = max((m for m in retimed if m.ok), key=lambda m: m.gflops)
    for r in runs:
        m = by_name.get(Config.make(fam.name, r["best"]).name) if r["best"] else None
        if m is not None and m.ok:
            r["fraction_of_optimum"] = m.gflops / optimum.gflops
        elif m is not None and m.status.value == "rejected":
            # Kernel Tuner runs configs autotune's filter rejects (spills): scored by its own timing.
            print(f"  {m.config.name}: {m.message}; scored by its own timing", flush=True)
            r["fraction_of_optimum"] = r["own_best_gflops"] / optimum.gflops
        else:
            r["fraction_of_optimum"] = 0.0
    cublas = ev.baseline(problem)
    ev.close()
    print(f"optimum {optimum.gflops:.0f} GFLOP/s ({optimum.config.name}); cuBLAS {cublas['gflops']:.0f}", flush=True)

    # Summary per (tool, strategy): mean fraction of optimum, mean wall time, wall time per evaluation.
    groups = {}
    for r in runs:
        groups.setdefault((r["tool"], r["strategy"]), []).append(r)
    print(
        "\n| tool | strategy | evaluations | fraction of optimum (mean, min, max) | wall time s (mean) "
        "| s per evaluation |"
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
            "repeats": len(rs),
            "fraction_mean": float(np.mean(frac)),
            "fraction_min": float(min(frac)),
            "fraction_max": float(max(frac)),
            "wall_mean_s": float(np.mean(wall)),
            "s_per_eval": float(np.sum(wall) / max(1, np.sum(evals))),
            "evaluations_mean": float(np.mean(evals)),
        }
        summary.append(row)
        print(
            f"| {tool} | {strat} | {row['evaluations_mean']:.0f} | "
            f"{row['fraction_mean']:.3f}, {row['fraction_min']:.3f}, {row['fraction_max']:.3f} | "
            f"{row['wall_mean_s']:.1f} | {row['s_per_eval']:.2f} |"
        )
    print(
        f"\noptimum {optimum.gflops:.0f} GFLOP/s ({optimum.config.name}), the best of {len(retimed)} re-timed configs"
    )
    if args.landscape and ms:
        args.landscape.parent.mkdir(parents=True, exist_ok=True)
        doc = {"gpu": ev.limits.name, "problem": problem.name, "space": SPACE, "cublas": cublas}
        doc |= {"measurements": [m.to_dict() for m in ms], "retimed": [m.to_dict() for m in retimed]}
        args.landscape.write_text(json.dumps(doc, indent=1, default=str))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "gpu": ev.limits.name,
                    "problem": problem.name,
                    "family": fam.name,
                    "space": space.values,
                    "valid_points": len(valid),
                    "brute_force_s": brute_s,
                    "optimum": optimum.to_dict(),
                    "retimed": [m.to_dict() for m in retimed],
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
