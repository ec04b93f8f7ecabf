"""Launch one config a few times in-process, for Nsight Compute:

    ncu --kernel-name autotune_sgemm --launch-skip 3 --launch-count 1 --section SchedulerStats \
        --section WarpStateStats python benchmarks/profile_one.py warptile '{"BM": 128, ...}' 4096
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.evaluate import prepare
from autotune.gpu.runner import Runner
from autotune.limits import DeviceLimits
from autotune.types import Config, Problem


def main() -> None:
    family, params, shape = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    problem = Problem.parse(shape)
    runner = Runner(0)
    info = dict(runner.info)
    info.pop("versions")
    limits = DeviceLimits(**info)
    (prep,) = prepare([Config.make(family, params)], problem, limits, limits.arch, {})
    if prep.spec is None:
        sys.exit(f"not runnable: {prep.measurement.status.value}: {prep.measurement.message}")
    prep.spec.pop("resources")
    runner.setup(problem.M, problem.N, problem.K)
    print(runner.verify(prep.spec))
    print(runner.time(prep.spec, target_s=0.01, min_reps=3, max_reps=3))


if __name__ == "__main__":
    main()
