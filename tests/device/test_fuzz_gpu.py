"""On the GPU: a fixed-seed share of the differential fuzzer (autotune fuzz) over the dispatch and
every stored kernel of the test results, and proof that it finds what a kernel keeps stale
between launches."""

import pytest
from helpers import RESULTS

from autotune.core.types import Config, Problem
from autotune.dispatch import fuzz

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def executor():
    from autotune.dispatch.fuzz.device import Executor

    return Executor()


def _wrong(executor, calls):
    return [(i, c, o.reason) for i, (c, o) in enumerate(executor.run(calls)) if not o.ok]


@pytest.mark.parametrize("seed", [11, 12])
def test_random_problems_through_matmul_are_right(executor, monkeypatch, seed):
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(RESULTS))
    calls = list(fuzz.cases(seed, 700, torch=executor.torch is not None))
    assert not _wrong(executor, calls)


def test_every_stored_kernel_is_right_near_its_shape_in_every_form(executor, monkeypatch):
    import cupy as cp

    from autotune.dispatch.api import _device_limits, _device_props, fallback_config
    from autotune.records.results import iter_records

    monkeypatch.setenv("AUTOTUNE_RESULTS", str(RESULTS))
    records = [(Problem(**r["problem"]), r["families"]) for _, r in iter_records(RESULTS, "nvidia-h100-80gb-hbm3")]
    dev = cp.cuda.Device().id
    arch = _device_props(dev)[1]
    # The forms this device's dispatcher can build, as `autotune fuzz` draws them.
    limits = _device_limits(dev, arch)
    calls = fuzz.coverage(records, [(Problem(777, 555, 333), fallback_config(arch))], 3, 2, limits)
    assert len({c.config["family"] for c in calls}) >= 4
    assert not _wrong(executor, calls)


def test_the_fuzzer_finds_counters_left_by_another_shape(executor, monkeypatch):
    """With the workspace zeroed only when allocated (as before the fix), a fewrows kernel that
    sums split K in its workspace meets, at a shape with more tile counters, the partial sums of a
    shape with fewer: the fuzzer must call that wrong, and shrink it to the calls that show it."""
    from autotune.gpu import launcher

    cfg = Config.make(
        "fewrows",
        {"MR": 4, "WARPS": 4, "KT": 4, "KCHUNK": 512, "UNROLL": 4, "STREAM": 1, "REDUCE": "last_block"},
    )
    config = {"family": cfg.family, "params": cfg.as_dict()}

    def case(n, k, seed):
        return fuzz.Case("coverage", 3, n, k, config=config, seed=seed)

    calls = [case(5120, 2560, 1), case(4096, 4096, 2), case(5120, 2560, 3)]
    executor.reset()
    assert not _wrong(executor, calls)
    monkeypatch.setattr(launcher.WORKSPACES, "zero", lambda *a: None)  # the old behaviour
    executor.reset()
    wrong = _wrong(executor, calls)
    assert [i for i, _, _ in wrong] == [2], wrong

    def fails(seq):
        executor.reset()
        return not list(executor.run(seq))[-1][1].ok

    shrunk = fuzz.shrink(calls, fails)
    assert shrunk is not None and len(shrunk) == 2 and shrunk[0].N == 4096


def test_the_fuzzer_takes_the_short_road_and_finds_it_wrong(executor, monkeypatch):
    """Half the calls are made twice: a short road (dispatch/shortcut.py) that wrote nothing is
    called wrong (a new output's; a row-major `out` with no padding goes it too)."""
    import cupy as cp

    from autotune.dispatch import shortcut

    def blank(self, A, B, alpha, out=None, beta=0.0):
        if out is None:
            return cp.full(self.shape, cp.nan, dtype=cp.float32)
        out.fill(cp.nan)
        return out

    monkeypatch.setenv("AUTOTUNE_RESULTS", str(RESULTS))
    monkeypatch.setattr(shortcut.CupyShortcut, "__call__", blank)
    calls = [c for c in fuzz.cases(13, 300) if c.kind == "cupy" and c.config is None]
    wrong = _wrong(executor, calls)
    assert wrong, "no call went the short road"
    assert any(c.seed % 2 for _, c, _ in wrong) and any(not c.out for _, c, _ in wrong)
