"""The clock a timing ran at, in records: carried from a measurement and cuBLAS's timing into the
entry, checked when read, optional (the committed records have none); check's line when a re-time
ran at another clock; a search's line when it ran throttled."""

import json
import shutil

import pytest
from helpers import GPU, RESULTS
from helpers import record_entry as _entry

from autotune.core.types import Config, Measurement, Problem, Status, UserError
from autotune.records.check import check_gpu, clock_notes
from autotune.records.results import iter_records, load_record
from autotune.records.store import make_entry, update_record
from autotune.search.replay import ReplayEvaluator

P = Problem(1000, 1000, 1000)
SLUG = "nvidia-h100-80gb-hbm3"
KERNEL = {"sm_clock_mhz": 1755, "power_w": 699.5, "throttle": ["sw_power_cap"]}
CUBLAS = {"sm_clock_mhz": 1980, "power_w": 512.0, "throttle": []}


def _clocked_entry(h100, kernel=KERNEL, cublas=CUBLAS):
    """An entry as a search on a GPU with NVML writes it: the clock in the measurement's extra
    (evaluate.py) and in cuBLAS's timing (the runner's dict)."""
    t = P.flops / 8000e6
    m = Measurement(Config.make("tiled", {"TILE": 32}), P, Status.OK, time_ms=t, time_min_ms=t, time_max_ms=t,
                    time_iqr_ms=0.0, repeats=20, gflops=8000.0, error=5e-7, extra=dict(kernel))  # fmt: skip
    base = {"time_ms": P.flops / 30000e6, "time_iqr_ms": 0.0, "gflops": 30000.0, "error": 5e-7, "path": "gemm",
            "paths": {"gemm": P.flops / 30000e6}, **cublas}  # fmt: skip
    return make_entry(m, base, search={"sampler": "tpe"}, versions={"cupy": "x"}, command="c", limits=h100.to_dict())


def test_the_clock_goes_into_the_record_and_comes_back(tmp_path, h100):
    entry = _clocked_entry(h100)
    assert {k: entry[k] for k in KERNEL} == KERNEL
    assert {k: entry["cublas"][k] for k in CUBLAS} == CUBLAS
    path, _ = update_record(tmp_path, GPU, P, {"tiled": entry})
    back = load_record(path)["families"]["tiled"]
    assert back == json.loads(json.dumps(entry))


def test_records_without_a_clock_are_as_valid_and_load_unchanged(tmp_path, h100):
    entry = _entry("tiled", {"TILE": 32}, 8000.0, h100)
    assert not {"sm_clock_mhz", "power_w", "throttle"} & (set(entry) | set(entry["cublas"]))
    path, _ = update_record(tmp_path, GPU, P, {"tiled": entry})
    assert load_record(path)["families"]["tiled"] == json.loads(json.dumps(entry))
    for folder in RESULTS.iterdir():  # the committed fixtures, from before the clock
        for path, record in iter_records(RESULTS, folder.name):
            assert record == json.loads(path.read_text())


@pytest.mark.parametrize(
    "where, key, value, fragment",
    [
        ("entry", "sm_clock_mhz", 0, "sm_clock_mhz is 0, not an integer from 1"),
        ("entry", "sm_clock_mhz", 1755.5, "not an integer"),
        ("cublas", "sm_clock_mhz", "fast", "cublas.sm_clock_mhz is 'fast'"),
        ("entry", "power_w", -1.0, "power_w is -1.0, not a number >= 0"),
        ("cublas", "power_w", 1e9, "more than 100000"),
        ("entry", "throttle", "sw_power_cap", "throttle is 'sw_power_cap', not a list"),
        ("entry", "throttle", ["Power Cap!"], "throttle[0] is 'Power Cap!'"),
        ("cublas", "throttle", ["x"] * 17, "not a list of at most 16"),
    ],
)
def test_a_clock_that_is_no_clock_is_refused(tmp_path, h100, where, key, value, fragment):
    path, _ = update_record(tmp_path, GPU, P, {"tiled": _clocked_entry(h100)})
    data = json.loads(path.read_text())
    entry = data["families"]["tiled"]
    (entry if where == "entry" else entry["cublas"])[key] = value
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="corrupted results file") as exc:
        load_record(path)
    assert fragment in str(exc.value)


def test_check_notes_another_clock_and_throttling():
    entry = {"sm_clock_mhz": 1980, "cublas": {"sm_clock_mhz": 1980}}
    assert clock_notes({"sm_clock_mhz": 1965}, entry, {"sm_clock_mhz": 1980}) == []  # one step: the same
    assert clock_notes({"sm_clock_mhz": 1755, "throttle": ["sw_power_cap"]}, entry, {"sm_clock_mhz": 1710}) == [
        "re-timed at 1755 MHz, recorded at 1980 MHz",
        "throttled now (sw_power_cap)",
        "cuBLAS re-timed at 1710 MHz, recorded at 1980 MHz",
    ]
    assert clock_notes({"sm_clock_mhz": 1755}, {"cublas": {}}, {}) == ["re-timed at 1755 MHz (no clock recorded)"]
    assert clock_notes({}, entry, {}) == []  # no NVML now: nothing said


class _ClockedReplay(ReplayEvaluator):
    """A replayed GPU whose timings ran at `mhz` (as GPUEvaluator's carry NVML's reading)."""

    mhz: int = 1755

    def evaluate(self, configs, problem, retime=False):
        out = super().evaluate(configs, problem, retime)
        for m in out:
            m.extra.update(sm_clock_mhz=self.mhz, power_w=700.0, throttle=["sw_power_cap"])
        return out

    def baseline(self, problem):
        return {**super().baseline(problem), "sm_clock_mhz": self.mhz, "power_w": 700.0, "throttle": []}


def _clocked_record(tmp_path) -> dict:
    """Copy a committed record under tmp_path with its clocks at 1980 MHz; return name -> GFLOP/s."""
    (tmp_path / SLUG).mkdir()
    shutil.copy(RESULTS / SLUG / "4096x4096x4096.json", tmp_path / SLUG)
    path = tmp_path / SLUG / "4096x4096x4096.json"
    data = json.loads(path.read_text())
    for entry in data["families"].values():
        entry["sm_clock_mhz"] = entry["cublas"]["sm_clock_mhz"] = 1980
    path.write_text(json.dumps(data))
    return {e["config"]["name"]: e["gflops"] for e in data["families"].values()}


def test_gpu_check_says_the_re_time_ran_at_another_clock(tmp_path, h100):
    table = _clocked_record(tmp_path)
    rows = check_gpu(tmp_path, SLUG, _ClockedReplay(table, h100, cublas_gflops=51700.0))
    assert rows and all(r.status == "pass" for r in rows)  # the verdict is the time's, as before
    for r in rows:
        assert "; re-timed at 1755 MHz, recorded at 1980 MHz; throttled now (sw_power_cap); " in r.detail
        assert r.detail.endswith("cuBLAS re-timed at 1755 MHz, recorded at 1980 MHz")


def test_a_search_says_which_timing_ran_throttled():
    from autotune.cli.search import summary, throttled

    assert throttled("warptile", dict(KERNEL), dict(CUBLAS)) == [
        "warptile: the re-time ran throttled (sw_power_cap) at 1755 MHz, 700 W; the record marks it"
    ]
    assert throttled("warptile", {"sm_clock_mhz": 1980, "throttle": []}, {}) == []

    class Result:  # driver.FamilyResult's fields that summary reads
        family, evaluated, counts, failures = "warptile", 30, {}, {}
        best = Measurement(Config.make("tiled", {"TILE": 32}), P, Status.OK, gflops=8000.0, error=5e-7,
                           extra={"ratio": 1.1, **KERNEL})  # fmt: skip
        cublas = {"gflops": 7000.0, **CUBLAS}

    text = summary([Result()], {"gflops": 7000.0, **CUBLAS}, 12.0)
    assert "warptile: the re-time ran throttled (sw_power_cap) at 1755 MHz, 700 W; the record marks it" in text
    assert text.endswith("cuBLAS 7000 GFLOP/s at the start (1980 MHz, 512 W); search took 12 s")


class _DippingReplay(_ClockedReplay):
    """A replayed GPU whose first `dips` timings of each config run throttled at `factor` speed."""

    def __init__(self, *args, dips=1, factor=0.85, **kw):
        super().__init__(*args, **kw)
        self.dips, self.factor, self.seen = dips, factor, {}

    def evaluate(self, configs, problem, retime=False):
        out = super().evaluate(configs, problem, retime)
        for m in out:
            n = self.seen[m.config.name] = self.seen.get(m.config.name, 0) + 1
            if n <= self.dips:
                m.gflops *= self.factor
            else:
                m.extra.update(sm_clock_mhz=1980, throttle=[])
        return out


@pytest.mark.parametrize("dips, status", [(1, "pass"), (2, "fail")])
def test_gpu_check_times_a_slow_throttled_config_twice(tmp_path, h100, dips, status):
    """A re-time slower than the tolerance that ran throttled is timed once more, the faster kept:
    a dip passes (no false alarm); slow twice still fails. A config not slow is timed once."""
    table = _clocked_record(tmp_path)
    ev = _DippingReplay(table, h100, cublas_gflops=51700.0, dips=dips)
    rows = check_gpu(tmp_path, SLUG, ev, tolerance=0.05)
    assert rows and [r.status for r in rows] == [status] * len(rows)
    assert all(n == 2 for n in ev.seen.values())  # each slow under the cap: timed again
    for r in rows:
        assert r.detail.endswith("; timed twice (the first ran throttled or below the recorded clock)")
        assert ("-15.0% vs record" in r.detail) == (status == "fail")
    steady = _DippingReplay(table, h100, cublas_gflops=51700.0, factor=0.97)  # within the tolerance
    rows = check_gpu(tmp_path, SLUG, steady, tolerance=0.05)
    assert all(r.status == "pass" and "timed twice" not in r.detail for r in rows)
    assert all(n == 1 for n in steady.seen.values())
    slow = ReplayEvaluator({k: 0.85 * v for k, v in table.items()}, h100, cublas_gflops=51700.0)
    rows = check_gpu(tmp_path, SLUG, slow, tolerance=0.05)  # slow at a steady clock: one timing, a failure
    assert all(r.status == "fail" and "timed twice" not in r.detail for r in rows)
    assert len(slow.calls) == len(rows)
