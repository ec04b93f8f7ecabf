"""On the GPU: every timing, a kernel's and cuBLAS's, carries the SM clock and power NVML read while
it ran, into the record a search writes."""

from pathlib import Path

import pytest

from autotune.core.types import Problem
from autotune.gpu import nvml
from autotune.kernels.space import Space

pytestmark = pytest.mark.gpu


def _clock_is_read(timing: dict) -> None:
    # An H100 or H200 boosts to 1980 MHz and draws up to 700 W; idle it sits near 345 MHz.
    assert 200 <= timing["sm_clock_mhz"] <= 3000 and 10 <= timing["power_w"] <= 2000, timing
    assert isinstance(timing["throttle"], list) and set(timing["throttle"]) <= set(nvml.THROTTLES.values())


@pytest.fixture
def with_nvml():
    if nvml.library() is None:
        pytest.skip("no NVML (libnvidia-ml.so.1) on this machine: timings have no clock")


def test_a_kernel_and_cublas_are_timed_with_their_clock(gpu_evaluator, with_nvml):
    from autotune.records.store import make_entry
    from autotune.records.validate import check_record

    problem = Problem(2048, 2048, 2048)
    sp = Space.load("warptile")
    (m,) = gpu_evaluator.evaluate([sp.family.built_for(sp.seeds[0], problem)], problem, retime=True)
    assert m.ok, m.message
    _clock_is_read(m.extra)
    base = gpu_evaluator.baseline(problem)
    _clock_is_read(base)
    # The record a search writes keeps both, and is one a reader trusts.
    limits = gpu_evaluator.limits.to_dict()
    entry = make_entry(m, base, search={"sampler": "tpe"}, versions={}, command="c", limits=limits)
    assert entry["sm_clock_mhz"] == m.extra["sm_clock_mhz"] and entry["cublas"]["power_w"] == base["power_w"]
    gpu = {"name": gpu_evaluator.limits.name, "slug": gpu_evaluator.limits.slug, "arch": limits["arch"]}
    record = {
        "schema": 1,
        "gpu": gpu,
        "problem": problem.as_dict(),
        "best": "warptile",
        "families": {"warptile": entry},
    }
    check_record(record, Path(gpu["slug"]) / f"{problem.name}.json")


def test_a_short_timing_still_has_a_clock(with_nvml):
    """Five launches of a tiny problem: shorter than a sample's interval, read right after."""
    from autotune.gpu.runner import Runner

    runner = Runner(0)
    runner.setup(64, 64, 64)
    _clock_is_read(runner.time("gemm", target_s=1e-5, min_reps=5, max_reps=5))
