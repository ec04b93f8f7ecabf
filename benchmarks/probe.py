"""Stored winners re-timed at other shapes, with other parameters or another beta, against cuBLAS
in the same process: the measurements that tell why a kernel is slow somewhere, without a search.

    python benchmarks/probe.py --records 768x768x768 --shapes 768,777,776,768x777x768
    python benchmarks/probe.py --records 768x768x768 --shapes 777 --set PACKB=0
    python benchmarks/probe.py --records standard --beta 3      # each of sweep.py's ten at its own shape

Each (record, variant, shape) is timed the way a search times a candidate (the runner's input sets
rotated out of L2, CUDA events per launch after a spin kernel, the median) and checked against
float64 first; cuBLAS is timed at each shape by the same runner (the faster of cupy.matmul and
cuBLAS gemm, gemm alone with beta != 0). --set NAME=V (repeatable) adds a variant of each record
with those parameters changed; --variant "NAME=V NAME=V" (repeatable) adds one variant each, so
one process compares several against the record; the record's own parameters are always timed too.

    python benchmarks/probe.py --records 4096x16x4096 --family warptile --repeat 3 \
        --variant "STAGES=3" --variant "BK=64 STAGES=3"

--params "FAMILY NAME=V ..." times that config (and its variants) in place of a stored entry, for a
kernel no search has stored yet; the records then only name the shapes.

--repeat R times each row R more times, each time right after cuBLAS at that shape, and reports the
median of those R ratios with their range: one timing's median moves by several per cent between
calls where the GPU's clocks follow its power (tensor-core tiers at 4096^3), and alternating the
two sides gives both the same conditions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweep import SETS

from autotune.core.types import Config, Problem
from autotune.dispatch.table import built_for
from autotune.gpu.runner import Runner
from autotune.kernels.limits import DeviceLimits
from autotune.records.results import best_entry, entry_config
from autotune.search.evaluate import prepare


def _changed(cfg: Config, sets: list[str]) -> Config:
    params = cfg.as_dict()
    for item in sets:
        name, _, value = item.partition("=")
        params[name] = int(value) if value.lstrip("-").isdigit() else value
    return Config.make(cfg.family, params)


def _variants(cfg: Config, sets: list[str], variants: list[str]) -> list[tuple[str, Config]]:
    out = [("record", cfg)]
    groups = ([sets] if sets else []) + [v.split() for v in variants]
    out += [(" ".join(g), _changed(cfg, g)) for g in groups]
    return out


def _rounds(runner: Runner, spec, path: str, n: int) -> dict:
    """n rounds of cuBLAS (`path`) then the kernel, timed alike: each round's times, and the
    median of the rounds' ratios (printed with their range)."""
    rounds = []
    for _ in range(n):
        c_ms = runner.time(path)["time_ms"]
        rounds.append({"ms": runner.time(spec)["time_ms"], "cublas_ms": c_ms})
    ratios = sorted(r["cublas_ms"] / r["ms"] for r in rounds)
    median = statistics.median(ratios)
    print(f"{'':>48}  {n} rounds: median {median:.3f}x, range {ratios[0]:.3f}-{ratios[-1]:.3f}x", flush=True)
    return {"rounds": rounds, "x_cublas_median": median}


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--records", required=True, help="tuned shapes (comma list) or a set of sweep.py: " + ", ".join(SETS)
    )
    ap.add_argument("--shapes", help="comma list of shapes to time each record at (default: the record's own)")
    ap.add_argument("--family", help="time this family's stored entry of each record (default: the record's fastest)")
    ap.add_argument(
        "--params",
        metavar="'FAMILY NAME=V ...'",
        help="time this config in place of a stored entry (the records then name only the shapes)",
    )
    ap.add_argument("--set", action="append", default=[], metavar="NAME=V", help="a variant with a parameter changed")
    ap.add_argument("--variant", action="append", default=[], metavar="'NAME=V ...'", help="one more variant per use")
    ap.add_argument("--beta", type=float, default=0.0, help="beta of every timed launch (default 0)")
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    ap.add_argument("--repeat", type=int, default=0, metavar="R", help="R more rounds of cuBLAS then the kernel")
    args = ap.parse_args()
    if args.repeat < 0:
        ap.error("--repeat: a count >= 0")
    return args


def main() -> int:
    args = _args()
    # --params: one config for every record, read before the GPU is touched.
    given = None
    if args.params:
        family, *sets = args.params.split()
        given = _changed(Config.make(family, {}), sets)

    runner = Runner(0)
    info = dict(runner.info)
    versions = info.pop("versions")
    limits = DeviceLimits(**info)
    records = SETS.get(args.records, args.records.split(","))
    rows, cublas = [], {}
    for rec in records:
        tuned = Problem.parse(rec)
        base = given or entry_config(best_entry(args.results, limits.slug, tuned, args.family)[1])
        shapes = [Problem.parse(s) for s in args.shapes.split(",")] if args.shapes else [tuned]
        for label, cfg in _variants(base, args.set, args.variant):
            for shape in shapes:
                p = shape.with_beta(args.beta)
                runner.setup(p.M, p.N, p.K, layout=p.layout, batch=p.batch, beta=p.beta, precision=p.precision)
                if p.name not in cublas:
                    cublas[p.name] = runner.cublas()
                # Built for the shape's layout and batch (an nn record timed at a _nt shape reads
                # B stored N x K; a PACKB 2 variant keeps its pack there and loses it in nn).
                here = built_for(cfg, p.layout, p.batch, p.precision)
                row = {"record": tuned.name, "variant": label, "shape": p.name, "config": (here or cfg).name}
                prep = prepare([here], p, limits, limits.arch, {})[0] if here is not None else None
                if prep is None or prep.spec is None:
                    row["rejected"] = prep.measurement.message if prep else f"no form of it for {p.name}"
                    print(f"{tuned.name:>16} {label:>12} {p.name:>18}  rejected: {row['rejected']}")
                    rows.append(row)
                    continue
                v = runner.verify(prep.spec)
                t = runner.time(prep.spec) if v["correct"] else {}
                cb = cublas[p.name]
                row |= {"error": v["error"], "ms": t.get("time_ms"), "cublas_ms": cb["time_ms"]}
                row["cublas_path"] = cb["path"]
                row["tflops"] = 2e-9 * p.M * p.N * p.K * p.batch / row["ms"] if row["ms"] else None
                row["x_cublas"] = cb["time_ms"] / row["ms"] if row["ms"] else None
                rows.append(row)
                ratio = f"{row['x_cublas']:.3f}x" if row["ms"] else "WRONG"
                print(f"{tuned.name:>16} {label:>12} {p.name:>18}  {row['ms'] or 0:.4f} ms  cuBLAS "
                      f"{cb['time_ms']:.4f} ms ({cb['path']})  {ratio}  err {v['error']:.1e}", flush=True)  # fmt: skip
                if args.repeat and row["ms"]:
                    row |= _rounds(runner, prep.spec, cb["path"], args.repeat)
    ok = [r.get("x_cublas_median", r["x_cublas"]) for r in rows if r.get("x_cublas")]
    if ok:
        geo = statistics.geometric_mean(ok)
        print(f"geometric mean {geo:.3f}x cuBLAS over {len(ok)} rows, lowest {min(ok):.3f}x")
    if args.out:
        doc = {"gpu": limits.slug, "versions": versions, "beta": args.beta, "rows": rows}
        args.out.write_text(json.dumps(doc, indent=1))
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
