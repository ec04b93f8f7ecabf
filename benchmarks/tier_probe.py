"""A tier family's seeds and fallback, verified and timed at a few shapes without a search: each
config's status (the accuracy contract's errors on every kind of input where it ran), its speed,
and cuBLAS in the same process -- SGEMM and TF32 -- so that a new tensor-core kernel is checked
and measured in one short run.

    python benchmarks/tier_probe.py --family wgmma_tf32 --precision medium --shapes 1000x777x300,4096
    python benchmarks/tier_probe.py --family wgmma_tf32 --precision high --set ACC=tc --shapes 4096

Each config is built for the tier (PRECISION pinned) and timed as a search times a candidate (the
runner's rotated inputs, CUDA events, the median). --set NAME=V (repeatable) changes a parameter
of every config probed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Config, Problem
from autotune.kernels.space import Space
from autotune.search.evaluate import GPUEvaluator


def _configs(space: Space, problem: Problem, sets: list[str]) -> list[Config]:
    out = []
    for cfg in [*space.seeds, space.fallback]:
        params = cfg.as_dict()
        for item in sets:
            name, _, value = item.partition("=")
            params[name] = int(value) if value.lstrip("-").isdigit() else value
        built = space.family.built_for(Config.make(space.family.name, params), problem)
        if built not in out:
            out.append(built)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True)
    ap.add_argument("--precision", required=True, choices=["high", "medium"])
    ap.add_argument("--shapes", required=True, help="comma list of N or MxNxK")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=V", help="change a parameter of every config")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per candidate before the worker is replaced")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args()

    space = Space.load(args.family)
    ev = GPUEvaluator(timeout_s=args.timeout)
    rows = []
    try:
        for text in args.shapes.split(","):
            dims = [int(x) for x in text.split("x")]
            M, N, K = dims * 3 if len(dims) == 1 else dims
            problem = Problem(M, N, K, precision=args.precision)
            base = ev.baseline(problem)
            paths = base["paths"]
            flop = 2.0 * M * N * K
            sgemm = min(paths.get("matmul", paths["gemm"]), paths["gemm"])
            tf32 = paths["gemm_tf32"]
            print(
                f"{problem.name}: cuBLAS SGEMM {flop / sgemm / 1e9:.1f} TFLOP/s, TF32 {flop / tf32 / 1e9:.1f} TFLOP/s "
                f"(same process)",
                flush=True,
            )
            for m in ev.evaluate(_configs(space, problem, args.set), problem):
                row = {"shape": problem.name, "config": m.config.name, "status": m.status.value, "message": m.message}
                row |= {"registers": m.registers, "error": m.error, "contract": m.extra.get("contract")}
                if m.ok:
                    row |= {"tflops": m.gflops / 1e3, "x_sgemm": sgemm / m.time_ms, "x_tf32": tf32 / m.time_ms}
                    print(
                        f"  {m.config.name}: {row['tflops']:.1f} TFLOP/s = {row['x_sgemm']:.2f}x SGEMM, "
                        f"{row['x_tf32']:.2f}x TF32; {m.registers} regs",
                        flush=True,
                    )
                else:
                    print(f"  {m.config.name}: {m.status.value}: {m.message}", flush=True)
                for r in row["contract"] or []:
                    pairs = zip(r["errors"], r["limit"], strict=True)
                    errs = ", ".join(f"{e:.2e} (limit {lim:.2e})" for e, lim in pairs)
                    print(f"      {r['kind']:>7}: {errs}", flush=True)
                rows.append(row | {"cublas_sgemm_ms": sgemm, "cublas_tf32_ms": tf32})
    finally:
        ev.close()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
