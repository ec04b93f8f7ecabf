"""The SM clock, power and throttling under timings of growing length, and what reading them costs:
cuBLAS gemm timed as the search times it (the runner's loop), with NVML read while it runs and
without, in turns.

    python benchmarks/clock_probe.py --shapes 4096,8192 --seconds 0.05,0.5,3

Per shape and timing length: the median time with the clock read and without (the reading must
not move it), the median SM clock, power and the throttle reasons seen. Where a long timing runs
below the short one's clock, a record's figure depends on how long it was timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Problem
from autotune.gpu.runner import Runner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="4096,8192", help="comma list of N or MxNxK")
    ap.add_argument("--seconds", default="0.05,0.5,3", help="comma list of timing lengths (target_s)")
    ap.add_argument("--path", default="gemm", help="cuBLAS entry point: gemm, matmul or gemm_tf32")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    runner = Runner(0)
    device = runner._nvml  # switched off and on around the same timings
    print(f"{runner.info['name']}: NVML {'found' if device is not None else 'missing: no clock'}", flush=True)
    rows = []
    for text in args.shapes.split(","):
        p = Problem.parse(text)
        runner.setup(p.M, p.N, p.K)
        for seconds in map(float, args.seconds.split(",")):
            runner._nvml = None
            bare = runner.time(args.path, target_s=seconds, max_reps=100000)
            runner._nvml = device
            read = runner.time(args.path, target_s=seconds, max_reps=100000)
            rows.append({"shape": text, "seconds": seconds, "bare": bare, "read": read})
            print(
                f"{text:>6} {seconds:5.2f} s  {read['repeats']:6d} launches  median {bare['time_ms']:.4f} ms "
                f"unread, {read['time_ms']:.4f} ms read ({read['time_ms'] / bare['time_ms'] - 1:+.2%})  "
                f"{read.get('sm_clock_mhz', '-')} MHz  {read.get('power_w', '-')} W  "
                f"throttle {','.join(read.get('throttle', [])) or '-'}",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
