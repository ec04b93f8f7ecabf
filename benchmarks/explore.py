"""Measure chosen configs (seeds, samples, or a list) against cuBLAS in one process.

    python benchmarks/explore.py --shapes 4096 --family warptile --sample 40 --where SPLITK=1
    python benchmarks/explore.py --shapes 4096,1000 --configs picks.yaml --sass

Prints a table per shape (GFLOP/s, x cuBLAS, error, registers) and writes every measurement
as JSON (--out). With --sass, the SASS instruction mix of the fastest few.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Config, Problem
from autotune.kernels.space import Space
from autotune.search.evaluate import GPUEvaluator, default_jobs


def pick(args, limits) -> list[Config]:
    configs: list[Config] = []
    if args.configs:
        for item in yaml.safe_load(Path(args.configs).read_text()):
            configs.append(Config.make(item["family"], item["params"]))
    rng = random.Random(args.seed)
    where = dict(kv.split("=") for kv in args.where.split(",")) if args.where else {}
    for fam in args.family or []:
        sp = Space.load(fam)
        configs += sp.seeds
        valid = [c for c in sp.enumerate(limits).valid if all(str(c.as_dict().get(k)) == v for k, v in where.items())]
        configs += rng.sample(valid, min(args.sample, len(valid)))
    return list(dict.fromkeys(configs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="4096", help="comma list of N or MxNxK")
    ap.add_argument("--family", nargs="*", help="families: their seeds plus --sample random valid points")
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--where", help="only sampled points with these params, e.g. SPLITK=1,MINB=2")
    ap.add_argument("--configs", help="YAML list of {family, params}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sass", action="store_true", help="SASS mix of the fastest 3 (needs cuobjdump)")
    ap.add_argument("--out", type=Path, help="write all measurements here (JSON)")
    args = ap.parse_args()

    ev = GPUEvaluator(0, jobs=default_jobs(), retime_target_s=0.5)
    report = {"gpu": ev.limits.name, "versions": ev.versions, "shapes": {}}
    configs = pick(args, ev.limits)
    print(f"{ev.limits.name}: {len(configs)} configs; {ev.versions}", flush=True)
    for shape in args.shapes.split(","):
        problem = Problem.parse(shape)
        t0 = time.monotonic()
        base0 = ev.baseline(problem)
        ms = ev.evaluate(configs, problem, retime=True)
        base1 = ev.baseline(problem)
        cublas = max(base0["gflops"], base1["gflops"])  # the faster of the two: the harder bar
        ok = sorted((m for m in ms if m.ok), key=lambda m: -m.gflops)
        print(
            f"\n== {problem.name}: cuBLAS {base0['gflops']:.0f} / {base1['gflops']:.0f} GFLOP/s "
            f"(before / after), {len(ok)}/{len(ms)} ok, {time.monotonic() - t0:.0f} s"
        )
        for m in ok[:25]:
            print(
                f"{m.gflops:8.0f} {m.gflops / cublas:6.3f}x  err {m.error:.1e}  iqr {m.time_iqr_ms / m.time_ms:5.1%}  "
                f"regs {m.registers:3d} smem {m.smem_bytes:6d}  {m.config.name}"
            )
        bad = [m for m in ms if not m.ok]
        for m in bad[:15]:
            print(f"  {m.status.value:>14}  {m.config.name}: {m.message[:120]}")
        entry = {"cublas": [base0, base1], "measurements": [m.to_dict() for m in ms]}
        if args.sass and ok:
            from autotune.kernels.sass import analyze_cubin
            from autotune.search.evaluate import prepare

            entry["sass"] = {}
            for m in ok[:3]:
                (prep,) = prepare([m.config], problem, ev.limits, ev.arch, ev.families)
                s = analyze_cubin(prep.spec["cubin"], prep.spec["kernel"]).summary()
                entry["sass"][m.config.name] = s
                print(
                    f"  SASS {m.config.name}: loop FFMA share {s['loop_ffma_share']:.1%}, "
                    f"LDS {s['loop_lds']}, local memory ops {s['local_memory']}"
                )
        key, n = problem.name, 1
        while key in report["shapes"]:  # a shape listed again (a repeat pass) keeps each pass
            n += 1
            key = f"{problem.name}#{n}"
        report["shapes"][key] = entry
    ev.close()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
