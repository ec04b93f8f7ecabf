"""A sampled landscape of one family's valid space at several shapes: the data a search strategy
or a static cost model is designed on (one shape) and judged on (the others), by replay.

    python benchmarks/landscape.py --family warptile --shapes 4096,2048,8192x8192x1024 \
        --uniform 500 --plausible 500 --out landscape/

`--config FILE` samples another space of the family (a space file as `autotune search --config`
takes, its seeds included), e.g. a region the default space reaches only sparsely.

The sample is drawn once from the valid space of the first shape (the spaces differ between
shapes only in layout-pinned parameters, the same for every shape here): `--uniform` points
uniformly; `--plausible` points uniformly among those with at least 64 outputs per thread, a
register budget (launch bounds) of at least that plus 40 and a block tile of at least 128 x 128
outputs -- where good configs of the large shapes are known to be, so that the top of the
landscape is sampled densely; and the family's seeds. Every point is compiled once in parallel
processes (the on-disk cache serves the other shapes), then each shape's points are measured by
GPUEvaluator as a search's trials are (verified, `target_s` of launches), and cuBLAS in the
same process. `landscape.csv` has a row per point (parameters, stratum, registers, spills, then
GFLOP/s or a status per shape) and `landscape.json` the cuBLAS figures, GPU and versions; both
are rewritten as each shape is done. `--replay-tables` also writes a replay table per shape
(`autotune search --replay`).
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def plausible(env: dict, limits) -> bool:
    """At least 64 accumulators a thread, registers left for them under the launch bounds, and
    a block tile of at least 128 x 128 outputs (False for a family without BM, BN and THREADS)."""
    if not all(k in env for k in ("BM", "BN", "THREADS")):
        return False
    threads, tile = env["THREADS"], env["BM"] * env["BN"]
    cap = min(limits.max_regs_per_thread, limits.regs_per_sm // (threads * env.get("MINB", 1)))
    return tile // threads >= 64 and cap >= tile // threads + 40 and tile >= 128 * 128


def write_csv(path: Path, configs: list, strata: dict, resources: dict, tables: dict) -> None:
    """One row per point: its parameters, stratum, registers and spills, then per shape its
    GFLOP/s or the status that stopped it (the form kept in git: a third of the replay tables')."""
    keys = sorted({k for c in configs for k in c.as_dict()})
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow([*keys, "stratum", "registers", "spill_bytes", *tables])
        for c in configs:
            p = c.as_dict()
            cells = [f"{t[c.name]:.1f}" if isinstance(t[c.name], float) else t[c.name] for t in tables.values()]
            out.writerow([p.get(k, "") for k in keys] + [strata[c.name], *resources[c.name], *cells])


def _compile(args: tuple) -> tuple[str, int, int]:
    family, params, arch = args
    from autotune.core.types import Config
    from autotune.gpu.compile import compile_source
    from autotune.kernels.render import DEFAULT_KERNEL, render
    from autotune.kernels.space import Family

    resolved = Family.load(family).resolve(Config.make(family, params))
    try:
        res = compile_source(render(resolved), resolved.family.compile_arch(arch), DEFAULT_KERNEL).resources
    except Exception:  # noqa: BLE001 - a compile failure is a data point; the evaluator records it
        return resolved.config.name, -1, -1
    return resolved.config.name, res.registers, res.spill_bytes


def sample(space, valid: list, limits, args) -> tuple[list, dict, list]:
    """The seeds, `args.plausible` plausible points and `args.uniform` uniform ones (seeded):
    (configs, name -> stratum, the plausible points)."""
    rng = random.Random(args.seed)
    uniform = rng.sample(valid, min(args.uniform, len(valid)))
    good = [c for c in valid if plausible(space.family.derive(c.as_dict()), limits)]
    top = rng.sample(good, min(args.plausible, len(good)))
    strata = {c.name: "seed" for c in space.seeds}
    for c in top:
        strata.setdefault(c.name, "plausible")
    for c in uniform:
        strata.setdefault(c.name, "uniform")
    by_name = {c.name: c for c in [*space.seeds, *top, *uniform]}
    configs = [by_name[n] for n in strata]
    return configs, strata, good


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="warptile")
    ap.add_argument("--config", type=Path, help="a space file (as search --config) in place of the family's own")
    ap.add_argument("--shapes", default="4096,2048,8192x8192x1024")
    ap.add_argument("--uniform", type=int, default=500)
    ap.add_argument("--plausible", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--replay-tables", action="store_true", help="also a replay table per shape (--replay)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from autotune.core.types import Problem
    from autotune.kernels.space import Space
    from autotune.search.evaluate import GPUEvaluator

    shapes = [Problem.parse(s) for s in args.shapes.split(",")]
    ev = GPUEvaluator()
    space = Space.load(args.family, path=args.config).for_problem(shapes[0])
    valid = space.enumerate(ev.limits).valid
    configs, strata, good = sample(space, valid, ev.limits, args)
    print(f"{len(valid)} valid, {len(good)} plausible; sampled {len(configs)}", flush=True)

    t0 = time.monotonic()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
        work = [(args.family, c.as_dict(), ev.arch) for c in configs]
        resources = {n: [r, s] for n, r, s in pool.map(_compile, work, chunksize=4)}
    print(f"compiled in {time.monotonic() - t0:.0f} s", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "family": args.family,
        "gpu": ev.limits.name,
        "versions": ev.versions,
        "valid_points": len(valid),
        "plausible_points": len(good),
        "cublas_gflops": {},
    }
    tables: dict[str, dict] = {}
    for problem in shapes:
        t1 = time.monotonic()
        base = ev.baseline(problem)
        table = {}
        for i in range(0, len(configs), 32):
            for m in ev.evaluate(configs[i : i + 32], problem):
                table[m.config.name] = m.gflops if m.ok else m.status.value
        ok = sorted(v for v in table.values() if isinstance(v, float))
        tables[problem.name] = table
        meta["cublas_gflops"][problem.name] = base["gflops"]
        write_csv(args.out / "landscape.csv", configs, strata, resources, tables)
        (args.out / "landscape.json").write_text(json.dumps(meta, indent=1))
        if args.replay_tables:
            replay = {"table": table, "cublas_gflops": base["gflops"]}
            (args.out / f"replay_{problem.name}.json").write_text(json.dumps(replay))
        best = ok[-1] if ok else 0.0
        print(
            f"{problem.name}: {len(ok)} ok of {len(table)}, best {best:.0f} GFLOP/s = "
            f"{best / base['gflops']:.3f}x cuBLAS ({base['gflops']:.0f}), {time.monotonic() - t1:.0f} s",
            flush=True,
        )
    ev.close()


if __name__ == "__main__":
    main()
