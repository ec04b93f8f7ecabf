import json

import pytest
from helpers import GPU, RESULTS
from helpers import record_entry as _entry

from autotune.core.types import Config, Measurement, Problem, Status, UserError
from autotune.records.results import best_entry, load_record, record_path
from autotune.records.store import make_entry, update_record

P = Problem(1000, 1000, 1000)


def test_round_trip_and_keep_the_faster(tmp_path, h100):
    e1 = _entry("tiled", {"TILE": 32}, 8000.0, h100)
    path, changed = update_record(tmp_path, GPU, P, {"tiled": e1})
    assert path == record_path(tmp_path, GPU["slug"], P) and changed == ["tiled"]
    rec = load_record(path)
    assert rec["families"]["tiled"] == json.loads(json.dumps(e1))
    assert rec["families"]["tiled"]["ratio"] == pytest.approx(8000 / 30000)
    slower = _entry("tiled", {"TILE": 16}, 7000.0, h100)
    _, changed = update_record(tmp_path, GPU, P, {"tiled": slower})
    assert changed == [] and load_record(path)["families"]["tiled"]["config"]["params"] == {"TILE": 32}
    again = _entry("tiled", {"TILE": 32}, 7500.0, h100)  # the stored config measured again: the current truth
    _, changed = update_record(tmp_path, GPU, P, {"tiled": again})
    assert changed == ["tiled"] and load_record(path)["families"]["tiled"]["gflops"] == 7500.0
    faster = _entry("coarse1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8}, 15000.0, h100)
    update_record(tmp_path, GPU, P, {"coarse1d": faster})
    rec, best = best_entry(tmp_path, GPU["slug"], P)
    assert best["config"]["family"] == "coarse1d" and rec["best"] == "coarse1d"
    assert not list(path.parent.glob(".*.tmp"))  # no temporary file left behind


def test_only_verified_measurements_are_recorded(h100):
    m = Measurement(Config.make("tiled", {"TILE": 32}), P, Status.INCORRECT, error=0.5)
    with pytest.raises(ValueError):
        make_entry(m, {"gflops": 1.0}, search={}, versions={}, command="", limits=h100.to_dict())


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"schema": 1}',
        '{"schema": 99, "problem": {}}',
        '{"schema": 1, "gpu": {"name": "x", "slug": "x"}, "problem": {"M": 0, "N": 1, "K": 1}, "families": {}}',
    ],
)
def test_corrupted_file_is_one_clear_error(tmp_path, text):
    path = tmp_path / "x" / "1000x1000x1000.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(UserError) as exc:
        load_record(path)
    assert str(path) in str(exc.value)


def test_a_record_of_no_families_may_leave_out_best_and_reads_as_none(tmp_path):
    """The check accepts it (nothing to name), so every reader gets best None, not a KeyError."""
    path = tmp_path / "nvidia-h100-80gb-hbm3" / "64x64x64.json"
    path.parent.mkdir()
    gpu = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "arch": "sm_90"}
    path.write_text(json.dumps({"schema": 1, "gpu": gpu, "problem": {"M": 64, "N": 64, "K": 64}, "families": {}}))
    record = load_record(path)
    assert record["best"] is None and record["families"] == {}


def test_corrupted_file_is_not_overwritten(tmp_path, h100):
    path = record_path(tmp_path, GPU["slug"], P)
    path.parent.mkdir(parents=True)
    path.write_text("{broken")
    with pytest.raises(UserError):
        update_record(tmp_path, GPU, P, {"tiled": _entry("tiled", {"TILE": 32}, 1.0, h100)})
    assert path.read_text() == "{broken"


def test_nearest_tuned_shape_with_and_without_a_family():
    from autotune.dispatch.table import nearest_entry

    root = RESULTS
    shape, entry = nearest_entry(Problem(4000, 4100, 4096), GPU["slug"], root)
    assert shape == Problem(4096, 4096, 4096) and entry["config"]["family"] == "warptile"
    shape, entry = nearest_entry(Problem(8000, 8192, 9000), GPU["slug"], root)
    assert shape == Problem(8192, 8192, 8192) and entry["config"]["family"] == "warptile"
    # vectorized is stored at 4096^3 only, beside warptile at 8192^3: 8192^3 falls back to 4096^3
    shape, entry = nearest_entry(Problem(8192, 8192, 8192), GPU["slug"], root, family="vectorized")
    assert shape == Problem(4096, 4096, 4096) and entry["config"]["family"] == "vectorized"
    assert nearest_entry(Problem(64, 64, 64), "no-such-gpu", root) is None


def test_several_gpus_resolve_to_the_named_one_or_this_machines(tmp_path, h100, monkeypatch):
    from autotune.records import results

    small = Problem(64, 64, 64)
    for name, slug in ((GPU["name"], "nvidia-h100-80gb-hbm3"), ("NVIDIA H200", "nvidia-h200")):
        entry = _entry("tiled", {"TILE": 16}, 1.0, h100, small)
        entry["limits"]["name"] = name  # measured on that GPU (H100's limits will do)
        update_record(tmp_path, {**GPU, "name": name, "slug": slug}, small, {"tiled": entry})
    assert results.resolve_gpu(tmp_path, "NVIDIA H200") == "nvidia-h200"
    monkeypatch.setattr(results, "live_gpu_slug", lambda: None)
    with pytest.raises(UserError, match="several GPUs.*--gpu"):
        results.resolve_gpu(tmp_path, None)
    monkeypatch.setattr(results, "live_gpu_slug", lambda: "nvidia-h200")
    assert results.resolve_gpu(tmp_path, None) == "nvidia-h200"
