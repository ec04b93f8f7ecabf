"""Run 102: wgmma_tf32 DIRECT=1 -- A and B copied in place by tensor maps, C^T = B^T A^T, no
preparation -- against the prepared medium seed and cuBLAS TF32 in the same process: the
accuracy contract (checked by the runner before timing), TFLOP/s, at the large shapes and at
awkward ones (tails; B or A pitches that rule tensor maps out, where the kernel copies itself)."""

import json
import sys

from autotune.evaluate import GPUEvaluator
from autotune.space import Family
from autotune.types import Config, Problem

fam = Family.load("wgmma_tf32")
M0 = dict(GROUP_M=8, PRECISION="medium", ACC="tc")
CONFIGS = {
    "prepared 128x256 s4": dict(BM=128, BN=256, STAGES=4, **M0),
    "direct 256x128 s4": dict(BM=256, BN=128, STAGES=4, DIRECT=1, **M0),
    "direct 256x128 s3": dict(BM=256, BN=128, STAGES=3, DIRECT=1, **M0),
    "direct 128x128 s5": dict(BM=128, BN=128, STAGES=5, DIRECT=1, **M0),
    "direct 192x128 s4": dict(BM=192, BN=128, STAGES=4, DIRECT=1, **M0),
    "direct 256x64 s4": dict(BM=256, BN=64, STAGES=4, DIRECT=1, **M0),
    "direct 128x192 s4": dict(BM=128, BN=192, STAGES=4, DIRECT=1, **M0),
    "direct 128x128 s4 fp32": dict(BM=128, BN=128, STAGES=4, DIRECT=1, **{**M0, "ACC": "fp32"}),
}

def main():
    shapes = [s.split(":") for s in sys.argv[1].split(",")]
    only = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else None
    ev = GPUEvaluator(timeout_s=30)
    rows = []
    try:
        for text, layout in shapes:
            M, N, K = (int(x) for x in text.split("x"))
            problem = Problem(M, N, K, layout, precision="medium")
            paths = ev.baseline(problem)["paths"]
            tf32 = paths["gemm_tf32"]
            flop = 2.0 * M * N * K
            print(f"{problem.name}: cuBLAS TF32 {flop / tf32 / 1e9:.1f} TFLOP/s", flush=True)
            names = [n for n in CONFIGS if only is None or any(o in n for o in only)]
            cfgs = [fam.built_for(Config.make("wgmma_tf32", CONFIGS[n]), problem) for n in names]
            for name, m in zip(names, ev.evaluate(cfgs, problem), strict=True):
                row = {"shape": problem.name, "name": name, "config": m.config.name, "status": m.status.value}
                row |= {"message": m.message, "registers": m.registers, "contract": m.extra.get("contract")}
                row |= {"cublas_tf32_ms": tf32}
                if m.ok:
                    row |= {"time_ms": m.time_ms, "tflops": flop / m.time_ms / 1e9, "x_tf32": tf32 / m.time_ms}
                    errs = "; ".join(
                        f"{r['kind']} " + "/".join(f"{e / lim:.2f}" for e, lim in zip(r["errors"], r["limit"], strict=True))
                        for r in row["contract"] or []
                    )
                    print(f"  {name:24s} {row['tflops']:6.1f} TFLOP/s {row['x_tf32']:.3f}x TF32  regs {m.registers}  err/limit {errs}", flush=True)
                else:
                    print(f"  {name:24s} {m.status.value}: {m.message[:300]}", flush=True)
                rows.append(row)
    finally:
        ev.close()
        json.dump(rows, open(sys.argv[3], "w"), indent=1) if len(sys.argv) > 3 else None


if __name__ == "__main__":
    main()
