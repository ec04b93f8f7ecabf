"""The fuzzer's drawing, bounds, shrinking and command line, without a GPU (tests/device/test_fuzz_gpu.py
runs it on one)."""

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
from helpers import RESULTS

from autotune.core.types import LAYOUTS, PRECISIONS, Config, Problem, UserError
from autotune.dispatch import fuzz
from autotune.kernels.limits import load_profile
from autotune.records.results import iter_records


def test_the_same_seed_draws_the_same_cases_and_another_seed_others():
    a = list(fuzz.cases(5, 300))
    assert a == list(fuzz.cases(5, 300))
    assert a != list(fuzz.cases(6, 300))


def test_cases_cover_every_regime_layout_tier_and_kind_of_call():
    cs = list(fuzz.cases(1, 3000, torch=True))
    assert {c.regime for c in cs} == set(fuzz.REGIMES)
    assert {c.layout for c in cs} == set(LAYOUTS)
    assert {c.precision for c in cs} == set(PRECISIONS)
    assert {c.data for c in cs} == set(fuzz.DATA)
    assert {c.special for c in cs} == {"", "nan", "inf"}
    assert {c.c_major for c in cs} == {"row", "col"} and {c.out for c in cs} == {True, False}
    assert {c.flags for c in cs} == {True, False} and {c.kind for c in cs} == {"cupy", "torch"}
    assert any(c.beta != 0 for c in cs) and any(c.alpha not in (0, 1) for c in cs)
    assert any(any(c.pads) for c in cs) and any(any(c.offsets) for c in cs)
    assert any(c.lead_a != c.lead_b for c in cs)  # broadcast batches
    # sizes that are not multiples of anything
    assert sum(c.M % 4 != 0 for c in cs) > len(cs) / 4 and sum(c.K % 16 != 0 for c in cs) > len(cs) / 3


def test_regimes_hold_what_they_promise_and_every_case_fits_the_device():
    for c in fuzz.cases(2, 3000):
        assert 2 * c.M * c.N * c.K * c.batch <= fuzz.MAX_FLOP
        assert max(c.M * c.K, c.K * c.N, c.M * c.N) * c.batch <= fuzz.MAX_ELEMENTS
        if c.regime == "few_rows":
            assert c.M <= 16
        elif c.regime == "few_cols":
            assert c.N <= 32
        elif c.regime == "small_k":
            assert c.K <= 16
        if c.beta != 0:
            assert c.out
        if c.special:
            assert c.alpha != 0  # 0 * Inf would be NaN where BLAS skips the product


def test_shapes_come_back_and_streams_come_in_pairs():
    cs = list(fuzz.cases(3, 2000))
    shapes = [(c.M, c.N, c.K) for c in cs if c.stream == 0]
    assert len(set(shapes)) < 0.85 * len(shapes)  # a shape seen before comes back
    for i, c in enumerate(cs):
        if c.stream == 1:
            assert cs[i + 1].stream == 2
        if c.stream == 2:
            assert cs[i - 1].stream == 1
    twins = [(a, b) for a, b in zip(cs, cs[1:], strict=False) if a.stream == 1 and (a.M, a.N, a.K) == (b.M, b.N, b.K)]
    assert twins  # one kernel on two streams at once


def test_a_case_goes_to_json_and_back():
    for c in fuzz.cases(4, 200):
        line = json.dumps(c.to_json())
        assert fuzz.Case.from_json(json.loads(line)) == c
    assert fuzz.parse_repro(fuzz.repro_line(list(fuzz.cases(4, 3))).split("'")[1]) == list(fuzz.cases(4, 3))


TINY = {"regime": "tiny", "M": 1, "N": 1, "K": 1}


@pytest.mark.parametrize(
    "bad",
    [
        {**TINY, "regime": "few_rows", "M": 0},
        {**TINY, "regime": "nope"},
        {**TINY, "alpha": float("inf")},
        {**TINY, "layout": "xx"},
        {**TINY, "pads": [1, 2]},
        {**TINY, "beta": 1.0, "out": False},
        {**TINY, "regime": "batch", "lead_a": [2], "lead_b": [3]},
        {**TINY, "flags": 1},
        {"regime": "tiny", "M": 1, "N": 1},
        {**TINY, "extra": 1},
    ],
)
def test_a_bad_case_is_one_clear_error(bad):
    with pytest.raises(UserError):
        fuzz.Case.from_json(bad)


def test_bounds_grow_with_k_and_loosen_with_the_tier():
    for K in (1, 100, 10_000):
        hi, tf3, tf1 = (fuzz.bound_factor(p, K) for p in ("highest", "high", "medium"))
        assert hi < tf3 and hi < tf1
        assert math.isclose(hi, (K + 2) * fuzz.U, rel_tol=1e-3)
    assert fuzz.bound_factor("highest", 1000) < fuzz.bound_factor("highest", 2000)
    assert fuzz.bound_factor("medium", 1) > 2.0**-10  # two operands rounded to TF32
    assert fuzz.bound_factor("high", 100) < fuzz.bound_factor("medium", 100)


def _case(**kw):
    base = {"regime": "general", "M": 40, "N": 50, "K": 60}
    return fuzz.Case(**{**base, **kw})


def test_shrink_finds_the_call_that_leaves_state_and_the_simplest_failing_case():
    # A fake device: a call with N > 100 leaves state that makes a later call with K odd wrong.
    def fails(calls):
        dirty = False
        for c in calls:
            wrong = dirty and c.K % 2 == 1
            dirty = dirty or c.N > 100
        return wrong

    history = [_case(N=10, seed=i) for i in range(20)]
    history[5] = _case(N=300, pads=(3, 0, 0), seed=5)
    history += [_case(K=77, M=999, pads=(1, 2, 3), beta=0.5, special="nan", alpha=1.5)]
    assert fails(history)
    shrunk = fuzz.shrink(history, fails)
    assert len(shrunk) == 2 and shrunk[0].N == 300
    last = shrunk[-1]
    assert last.K % 2 == 1 and last.M == 1 and last.N == 1 and last.K == 1
    assert (last.pads, last.beta, last.special, last.alpha) == ((0, 0, 0), 0.0, "", 1.0)


def test_shrink_says_so_when_no_short_tail_fails_again():
    assert fuzz.shrink([_case(seed=i) for i in range(300)], lambda calls: len(calls) == 300) is None


def test_interleave_keeps_both_orders_and_stream_pairs_together():
    first = list(fuzz.cases(8, 400))
    second = [_case(seed=i) for i in range(50)]
    mixed = fuzz.interleave(first, second, 8)
    assert [c for c in mixed if c in second] == second
    assert [c for c in mixed if c not in second] == first
    for i, c in enumerate(mixed):
        if c.stream == 1:
            assert mixed[i + 1].stream == 2


def test_coverage_runs_every_stored_entry_in_every_form_it_has(h100):
    from autotune.dispatch.table import built_for
    from autotune.kernels.family import cached_family

    records = [(Problem(**r["problem"]), r["families"]) for _, r in iter_records(RESULTS, "nvidia-h100-80gb-hbm3")]
    calls = fuzz.coverage(records, [], seed=1, per_kernel=2, limits=h100)
    ran = {(c.config["family"], json.dumps(c.config["params"], sort_keys=True)) for c in calls}
    for _, fams in records:
        for f, entry in fams.items():
            for layout in LAYOUTS:
                cfg = built_for(Config.make(f, entry["config"]["params"]), layout, limits=h100)
                if cfg is not None and not cached_family(f).gaps(Problem(1, 1, 1, layout)):
                    assert (f, json.dumps(cfg.as_dict(), sort_keys=True)) in ran
    for c in calls:
        fam = cached_family(c.config["family"])
        assert not fam.unsuited(Problem(c.M, c.N, c.K))
        # Every form drawn is one the dispatcher could build on this device: none past its limits
        # (a coarse1d form with TRANS_B padding past 48 KB of static shared memory once was).
        assert not fam.violations(fam.resolve(Config.make(c.config["family"], c.config["params"])), h100)
        assert c.layout == "nt"[c.config["params"].get("TRANS_A", 0)] + "nt"[c.config["params"].get("TRANS_B", 0)]


def test_coverage_runs_a_kernel_stored_for_a_shape_its_family_is_not_meant_for(h100):
    from autotune.kernels.family import cached_family

    # A search that names a family stores its best even where the family's `suits` says no (the
    # H200's records hold fewrows winners at thousands of rows); the dispatcher runs it there.
    params = dict(AK=1, BATCHED=0, KCHUNK=128, KT=1, MR=16, REDUCE="last_block", STREAM=1, UNROLL=8, WARPS=8, WK=1)
    entry = {"config": {"family": "fewrows", "params": {**params, "TRANS_A": 0, "TRANS_B": 0}}}
    tuned = Problem(3261, 5286, 431)
    assert cached_family("fewrows").unsuited(tuned)
    calls = fuzz.coverage([(tuned, {"fewrows": entry})], [], seed=3, per_kernel=2, limits=h100)
    assert calls and all(c.config["family"] == "fewrows" for c in calls)
    assert all(c.M > 32 and c.K > 32 for c in calls)  # near the tuned shape, not at one fewrows suits


def _autotune(*args, **kw):
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True, **kw)


@pytest.mark.parametrize(
    "args, says",
    [
        (["fuzz", "--repro", "not json"], "--repro: not JSON"),
        (["fuzz", "--repro", "[]"], "--repro: expected a JSON list"),
        (["fuzz", "--repro", '[{"regime": "tiny", "M": -1, "N": 1, "K": 1}]'], "a case with bad fields: M -1"),
        (["fuzz", "--seed", "-1"], "argument --seed: expected an integer from 0 to 4294967295"),
        (["fuzz", "--problems", "0"], "argument --problems"),
        (["fuzz", "--coverage", "1e3"], "argument --coverage"),
    ],
)
def test_bad_fuzz_arguments_are_one_line(args, says):
    r = _autotune(*args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


def test_fuzz_without_a_gpu_is_one_line(tmp_path):
    import cupy

    try:
        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver
        has_gpu = False
    if has_gpu:
        pytest.skip("this machine has a GPU")
    r = _autotune("fuzz", "--problems", "3", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("autotune: error: no usable CUDA GPU"), r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # compiles every kernel a fuzz run loads (about 7 s)
def test_compile_only_fills_the_cache_with_the_kernels_a_run_loads(tmp_path):
    """No GPU needed: the stored kernels (one tiled record here) and the fallback, each form."""
    from autotune.dispatch.api import fallback_config
    from autotune.records.store import update_record

    rec = json.loads((RESULTS / "nvidia-h100-80gb-hbm3" / "4096x4096x4096.json").read_text())
    tiled = rec["families"]["tiled"]
    update_record(tmp_path / "res", rec["gpu"], Problem(4096, 4096, 4096), {"tiled": tiled})
    cache = tmp_path / "cache"
    env = {**os.environ, "AUTOTUNE_CACHE": str(cache)}
    r = _autotune("fuzz", "--compile-only", "--results", str(tmp_path / "res"), env=env)
    assert r.returncode == 0, r.stderr
    forms = fuzz.coverage(
        [(Problem(4096, 4096, 4096), {"tiled": tiled})],
        [(Problem(777, 555, 333), fallback_config("sm_90"))],
        0,
        1,
        load_profile("h100"),
    )
    kernels = {json.dumps([c.config["family"], c.config["params"]], sort_keys=True) for c in forms}
    assert len(list((cache / "nvrtc").glob("*.cubin"))) == len(kernels)


def test_a_case_knows_its_problem():
    c = _case(lead_a=(3, 1), lead_b=(1, 4), beta=2.0, precision="high", layout="tn")
    assert c.lead == (3, 4) and c.batch == 12
    assert c.problem == Problem(40, 50, 60, "tn", 12, 2.0, "high")
    assert dataclasses.replace(c, data="ints").exact and not c.exact


# ---- the device side's check, run on NumPy in place of CuPy ----------------------------------------


class _Stream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


class _NumpyAsCupy:
    """NumPy where autotune.dispatch.fuzz.device calls CuPy: the same array code runs on the host."""

    import types as _types

    cuda = _types.SimpleNamespace(Stream=lambda **kw: _Stream(), get_current_stream=_Stream)

    def __getattr__(self, name):
        import numpy

        return getattr(numpy, name)


def _host_matmul(mistake=None):
    """autotune.matmul on the host, right, or with one `mistake`."""
    import numpy as np

    def matmul(A, B, out=None, alpha=1.0, beta=0.0, *, trans_a=False, trans_b=False, precision="highest"):
        a = A.swapaxes(-1, -2) if trans_a else A
        b = B.swapaxes(-1, -2) if trans_b else B
        if mistake == "drop_last_k":
            a, b = a[..., :-1], b[..., :-1, :]
        prod = np.matmul(a.astype(np.float64), b.astype(np.float64))
        c = alpha * prod + (beta * out if beta != 0 else 0)
        if out is None:
            out = np.empty(c.shape, np.float32)
        out[...] = c
        if mistake == "unwritten" and out.size > 1:
            out.reshape(-1)[out.size // 2] = np.nan if out.flags.c_contiguous else out.flat[0]
            out[..., -1, -1] = np.nan
        if mistake == "nan_lost":
            np.nan_to_num(out, copy=False)
        if mistake == "pad" and out.base is not None:
            out.base.reshape(-1)[-1] = 7.0  # C's buffer past C (its padding, when it has one)
        return out

    return matmul


def _host_executor(monkeypatch, mistake=None):
    from autotune.dispatch.fuzz import device

    monkeypatch.setattr(device, "cp", _NumpyAsCupy())
    ex = device.Executor(_host_matmul(mistake))
    ex.torch = None
    return ex


def _host_cases(n, seed=0, **fixed):
    small = []
    for c in fuzz.cases(seed, 4 * n):
        if c.batch * max(c.M * c.K, c.K * c.N, c.M * c.N) <= 40_000 and c.kind == "cupy":
            small.append(dataclasses.replace(c, **fixed))
        if len(small) == n:
            return small
    return small


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on NaN and Inf, as IEEE says
def test_a_right_product_passes_every_check(monkeypatch):
    ex = _host_executor(monkeypatch)
    outcomes = list(ex.run(_host_cases(150)))
    assert len(outcomes) == 150
    assert [o.reason for _, o in outcomes if not o.ok] == []
    assert max(o.ratio for _, o in outcomes) < 1  # errors well inside the bound


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    "mistake, fixed, says",
    [
        ("drop_last_k", {"data": "ints", "special": ""}, "elements wrong"),
        ("drop_last_k", {"data": "uniform", "special": ""}, "elements wrong"),
        ("unwritten", {"special": ""}, "elements wrong"),
        ("nan_lost", {"special": "nan"}, "elements wrong"),
        ("pad", {"pads": (0, 0, 2), "special": ""}, "wrote into C's buffer outside C"),
    ],
)
def test_each_kind_of_wrong_answer_is_caught(monkeypatch, mistake, fixed, says):
    ex = _host_executor(monkeypatch, mistake)
    # alpha 1 (a product times 0 hides any mistake in it) and C given (its buffer is the caller's)
    cases = [c for c in _host_cases(40, 1, alpha=1.0, out=True, **fixed) if c.K > 4 and c.M * c.N > 1]
    outcomes = [o for _, o in ex.run(cases)]
    wrong = [o for o in outcomes if not o.ok]
    # (a dropped term can hide where B's last row is zero, or under the medium tier's bound at a deep K)
    assert len(wrong) >= 0.9 * len(cases) and all(says in o.reason for o in wrong), [o.reason for o in outcomes][:5]
