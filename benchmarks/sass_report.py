"""What the compiler made of a stored winner: registers, spills, shared memory and the SASS mix.

python benchmarks/sass_report.py --size 4096 [--family warptile] [--gpu NAME]
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Problem
from autotune.gpu.compile import compile_source
from autotune.kernels.render import DEFAULT_KERNEL, render
from autotune.kernels.sass import analyze_cubin, find_cuobjdump
from autotune.kernels.space import Family
from autotune.records.results import best_entry, entry_config, resolve_gpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="4096")
    ap.add_argument("--family")
    ap.add_argument("--gpu")
    ap.add_argument("--results", type=Path, default=Path("results"))
    args = ap.parse_args()
    slug = resolve_gpu(args.results, args.gpu)
    record, entry = best_entry(args.results, slug, Problem.parse(args.size), args.family)
    cfg = entry_config(entry)
    compiled = compile_source(render(Family.load(cfg.family).resolve(cfg)), record["gpu"]["arch"], DEFAULT_KERNEL)
    stats = analyze_cubin(compiled.cubin, DEFAULT_KERNEL).summary()
    out = {
        "config": cfg.name,
        "gflops": entry["gflops"],
        "ratio": entry["ratio"],
        "registers": compiled.resources.registers,
        "spill_bytes": compiled.resources.spill_bytes,
        "stack_bytes": compiled.resources.stack_bytes,
        "smem_bytes": entry["smem_bytes"],
        "cuobjdump": find_cuobjdump(),
        **stats,
    }
    if Family.load(cfg.family).resolve(cfg).plan.has_tail:  # a split launch: its tail kernel too
        out["tail_kernel"] = analyze_cubin(compiled.cubin, DEFAULT_KERNEL + "_tail").summary()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
