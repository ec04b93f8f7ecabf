"""Launch one config (or cuBLAS) a few times in-process, for Nsight Compute:

    ncu --profile-from-start off --kernel-name autotune_sgemm --launch-skip 3 --launch-count 1 \
        --section WarpStateStats python benchmarks/profile_one.py warptile '{"BM": 128, ...}' 4096
    ncu --profile-from-start off --launch-skip 3 --launch-count 1 --section WarpStateStats \
        python benchmarks/profile_one.py cublas gemm_tf32 4096_medium

The shape is as results files name it (layout, batch, beta and precision suffixes), so the
operands are stored as the kernel reads them. With family "cublas" the second argument is one of
the runner's cuBLAS paths (matmul, gemm, gemm_tf32), timed by the same loop.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Config, Problem
from autotune.gpu.runner import Runner
from autotune.kernels.limits import DeviceLimits
from autotune.search.evaluate import prepare


def main() -> None:
    family, params, shape = sys.argv[1], sys.argv[2], sys.argv[3]
    p = Problem.parse(shape)
    runner = Runner(0)
    info = dict(runner.info)
    info.pop("versions")
    limits = DeviceLimits(**info)
    spec = params
    if family != "cublas":
        (prep,) = prepare([Config.make(family, json.loads(params))], p, limits, limits.arch, {})
        if prep.spec is None:
            sys.exit(f"not runnable: {prep.measurement.status.value}: {prep.measurement.message}")
        spec = prep.spec
        spec.pop("resources")
    runner.setup(p.M, p.N, p.K, layout=p.layout, batch=p.batch, beta=p.beta, precision=p.precision)
    if family != "cublas":
        print(runner.verify(spec))
    # Only the timing loop is profiled (ncu --profile-from-start off): the operands' setup and the
    # float64 reference launch kernels of their own, some with "gemm" in their names.
    import cupy as cp

    cp.cuda.runtime.profilerStart()
    print(runner.time(spec, target_s=0.01, min_reps=3, max_reps=3))
    cp.cuda.runtime.profilerStop()


if __name__ == "__main__":
    main()
