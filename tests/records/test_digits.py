"""Records keep a measured float to the digits it carries (float32's 7): rounded when an entry is
made, read back as written, and still checked by every figure that agrees with another."""

import json
import math

import pytest
from helpers import GPU, ROOT

from autotune.core.types import Config, Measurement, Problem, Status, UserError
from autotune.records.fields import DIGITS
from autotune.records.results import gpu_dirs, iter_records, load_record
from autotune.records.store import make_entry, measured_digits, update_record

P = Problem(1000, 1000, 1000, beta=0.1)  # a beta no float32 holds exactly: an input, kept whole
CONTRACT = {"kind": "uniform", "errors": [3.568055175613655e-07], "limit": [2.310899510164837e-06],
            "cublas": [1.5405996734432247e-06]}  # fmt: skip


def _digits(x: float) -> int:
    """The significant digits of `x` as JSON writes it."""
    mantissa = repr(x).split("e")[0].replace("-", "").replace(".", "").lstrip("0")
    return len(mantissa)


def _entry(h100, *, lo, mid, hi, iqr, gflops=None):
    """An entry as a search makes it, its figures with all the digits a float64 holds."""
    gflops = gflops or P.flops / (mid * 1e6)
    m = Measurement(Config.make("tiled", {"TILE": 32}), P, Status.OK, time_ms=mid, time_min_ms=lo, time_max_ms=hi,
                    time_iqr_ms=iqr, repeats=200, gflops=gflops, error=3.691626777879352e-07, registers=208,
                    spill_bytes=0, smem_bytes=16384,
                    extra={"code": "524aa241603d8abd", "power_w": 317.3, "contract": [CONTRACT]})  # fmt: skip
    cublas_ms = 0.21871200203895569
    paths = {"gemm": cublas_ms, "matmul": 0.2251839935779571}
    cublas = {"time_ms": cublas_ms, "time_iqr_ms": 0.0008719991892576218, "gflops": P.flops / (cublas_ms * 1e6),
              "error": 5.737596745321911e-07, "path": "gemm", "paths": paths}  # fmt: skip
    search = {"sampler": "tpe", "seed": 0, "trials": 40, "seconds": 36.8}
    return make_entry(m, cublas, search=search, versions={"cupy": "14.2.0"}, command="c", limits=h100.to_dict())


def test_an_entry_keeps_seven_digits_of_each_measured_float_and_the_rest_whole(tmp_path, h100):
    entry = _entry(h100, lo=0.19593600928783417, mid=0.20057600736618042, hi=0.2150079905986786,
                   iqr=0.0014399997889995575)  # fmt: skip
    measured = [entry[k] for k in ("time_ms", "time_min_ms", "time_max_ms", "time_iqr_ms", "gflops", "error", "ratio")]
    cublas = entry["cublas"]
    measured += [cublas[k] for k in ("time_ms", "time_iqr_ms", "gflops", "error")] + list(cublas["paths"].values())
    measured += [x for k in ("errors", "limit", "cublas") for x in entry["contract"][0][k]]
    assert len(measured) == 16 and all(_digits(x) <= DIGITS for x in measured)
    assert max(_digits(x) for x in measured) == DIGITS  # rounded, not cut shorter
    assert entry["time_ms"] == 0.200576 and entry["time_min_ms"] == 0.195936 and cublas["paths"]["gemm"] == 0.218712
    # What is not a measured float is as given: the problem's beta, integers, text, the config.
    assert entry["problem"]["beta"] == 0.1 and entry["repeats"] == 200 and entry["code"] == "524aa241603d8abd"
    assert entry["config"]["params"] == {"TILE": 32} and entry["power_w"] == 317.3
    assert entry["search"]["seconds"] == 36.8 and cublas["path"] == "gemm"
    assert measured_digits(entry) == entry  # rounding twice changes nothing
    path, _ = update_record(tmp_path, GPU, P, {"tiled": entry})  # checked as read before it is written
    assert load_record(path)["families"]["tiled"] == json.loads(json.dumps(entry))
    assert "0.200576," in path.read_text() and "0.20057600736618042" not in path.read_text()


def test_a_spread_as_wide_as_its_extremes_reads_after_rounding(tmp_path, h100):
    # The fastest time rounds up, the slowest down and the spread up: rounded, the spread is
    # wider than its extremes by a ten-millionth, which the check allows.
    lo, hi = 0.12345675001, 0.3456784499
    entry = _entry(h100, lo=lo, mid=0.2, hi=hi, iqr=hi - lo)
    assert entry["time_iqr_ms"] > entry["time_max_ms"] - entry["time_min_ms"] + 1e-9 * entry["time_ms"]
    path, _ = update_record(tmp_path, GPU, P, {"tiled": entry})
    assert load_record(path)["families"]["tiled"]["time_iqr_ms"] == entry["time_iqr_ms"]


@pytest.mark.parametrize(
    "key, value, fragment",
    [
        ("time_iqr_ms", (0.3456784 - 0.1234568) * 1.00001, "time_iqr_ms 0.222224 is more than time_max_ms"),
        ("time_min_ms", 0.2 * 1.00001, "time_ms 0.2 is not between time_min_ms 0.200002"),
        ("ratio", None, "is not its GFLOP/s over cuBLAS's"),
        ("gflops", None, "GFLOP/s is not its time"),
    ],
)
def test_a_figure_damaged_past_its_digits_is_refused(tmp_path, h100, key, value, fragment):
    entry = _entry(h100, lo=0.12345675001, mid=0.2, hi=0.3456784499, iqr=0.1)
    entry[key] = value if value is not None else entry[key] * 1.01  # past the checks' 1e-3
    with pytest.raises(UserError, match=fragment):
        update_record(tmp_path, GPU, P, {"tiled": entry})


def test_entries_that_tie_once_rounded_keep_the_first_as_best(tmp_path, h100):
    fast = _entry(h100, lo=0.19, mid=0.2, hi=0.21, iqr=0.01, gflops=P.flops / 0.2e6 * (1 + 2e-8))
    slow = _entry(h100, lo=0.19, mid=0.2, hi=0.21, iqr=0.01)
    slow["config"] = {"family": "coarse1d", "params": {"BK": 8, "BM": 64, "BN": 64, "TM": 8},
                      "name": "coarse1d_BK8_BM64_BN64_TM8"}  # fmt: skip
    assert fast["gflops"] == slow["gflops"]  # 7 digits cannot tell them apart
    path, _ = update_record(tmp_path, GPU, P, {"coarse1d": slow, "tiled": fast})
    assert load_record(path)["best"] == "coarse1d"


def test_the_committed_records_keep_the_digits_their_measurements_have():
    root = ROOT / "results"
    seen = 0
    for folder in gpu_dirs(root):
        for path, record in iter_records(root, folder):
            for fam, entry in record["families"].items():
                assert measured_digits(entry) == entry, f"{path.name}: {fam} has more than {DIGITS} digits"
                seen += 1
            assert math.isfinite(record["families"][record["best"]]["gflops"])
    assert seen > 400
