import json
import shutil

import pytest
from helpers import RESULTS, restamp

from autotune.core.types import Status
from autotune.records.check import check_gpu, check_static
from autotune.records.results import iter_records
from autotune.search.replay import ReplayEvaluator

SLUG = "nvidia-h100-80gb-hbm3"


def test_static_check_passes_on_records_of_this_template_version():
    # The H200 fixtures are records of the current templates (all five families, a split launch,
    # split-K with packed B). The H100 ones predate stream-K and B packing, and the static check
    # rightly reports their changed register counts.
    rows = check_static(RESULTS, "nvidia-h200")
    stored = [
        (f"{r['problem']['M']}x{r['problem']['N']}x{r['problem']['K']}", fam)
        for _p, r in iter_records(RESULTS, "nvidia-h200")
        for fam in r["families"]
    ]
    assert len(stored) == 6 and sorted((r.shape, r.family) for r in rows) == sorted(stored)
    assert [r for r in rows if r.status == "fail"] == []


@pytest.fixture
def one_record(tmp_path):
    (tmp_path / SLUG).mkdir()
    shutil.copy(RESULTS / SLUG / "4096x4096x4096.json", tmp_path / SLUG)
    return tmp_path, tmp_path / SLUG / "4096x4096x4096.json"


def _edit(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


@pytest.mark.slow  # a static check of a folder: 20 s on two cores (CI's slow step)
def test_static_check_fails_when_resources_change(one_record):
    root, path = one_record
    _edit(path, lambda d: d["families"]["warptile"].update(registers=12))
    rows = {r.family: r for r in check_static(root, SLUG)}
    assert rows["warptile"].status == "fail" and "registers 12 ->" in rows["warptile"].detail
    assert rows["vectorized"].status == "pass"


@pytest.mark.slow  # many NVRTC builds: 40 s on two cores (CI's slow step)
def test_a_record_of_the_same_source_tells_a_compiler_difference_from_a_template_change(one_record):
    """A record that names the hash of the source it measured: a register difference on the
    same source is the compiler's (builds of one NVRTC version differ), a warning; on another
    source the template changed since, a failure, whatever the NVRTC version."""
    from autotune.kernels.family import Family
    from autotune.kernels.render import source_digest
    from autotune.records.results import entry_config

    root, path = one_record
    entry = json.loads(path.read_text())["families"]["warptile"]
    digest = source_digest(Family.load("warptile").resolve(entry_config(entry)))
    assert len(digest) == 16 and digest != source_digest(Family.load("vectorized").resolve(
        entry_config(json.loads(path.read_text())["families"]["vectorized"])))  # fmt: skip

    _edit(path, lambda d: d["families"]["warptile"].update(registers=12, source=digest))
    (row,) = [r for r in check_static(root, SLUG) if r.family == "warptile"]
    assert row.status == "warn" and "registers 12 ->" in row.detail and "the source measured" in row.detail

    _edit(path, lambda d: d["families"]["warptile"].update(source="0" * 16))
    (row,) = [r for r in check_static(root, SLUG) if r.family == "warptile"]
    assert row.status == "fail" and "the source changed since the record" in row.detail
    # Even where the record names another NVRTC version (without a hash, a warning).
    _edit(path, lambda d: d["families"]["warptile"]["versions"].update(nvrtc="12.4"))
    (row,) = [r for r in check_static(root, SLUG) if r.family == "warptile"]
    assert row.status == "fail"


@pytest.mark.slow  # a static check of a folder: 15 s on two cores (CI's slow step)
def test_static_check_fails_when_a_config_breaks_a_rule(one_record):
    root, path = one_record

    def break_rule(data):
        data["families"]["coarse2d"]["config"]["params"]["TM"] = 3
        restamp(data)  # the config's name is its parameters', as a search writes it

    _edit(path, break_rule)
    rows = {r.family: r for r in check_static(root, SLUG)}
    assert rows["coarse2d"].status == "fail" and "BM % TM == 0" in rows["coarse2d"].detail


def _replay(root, factor=1.0, broken=()):
    from autotune.kernels.limits import load_profile

    table = {}
    for _p, rec in iter_records(root, SLUG):
        for fam, e in rec["families"].items():
            table[e["config"]["name"]] = Status.INCORRECT if fam in broken else e["gflops"] * factor
    return ReplayEvaluator(table, load_profile("h100"), cublas_gflops=51700.0)


def test_gpu_check_passes_within_tolerance_and_fails_beyond(one_record):
    root, _ = one_record
    assert all(r.status == "pass" for r in check_gpu(root, SLUG, _replay(root, 0.97), tolerance=0.05))
    seen = []
    rows = check_gpu(root, SLUG, _replay(root, 0.90), tolerance=0.05, progress=lambda *a: seen.append(a))
    assert rows and all(r.status == "fail" for r in rows)
    assert seen == [(1, 1)]  # one record: its configs re-timed, then said


def test_gpu_check_fails_an_incorrect_config(one_record):
    root, _ = one_record
    rows = {r.family: r for r in check_gpu(root, SLUG, _replay(root, broken=("warptile",)))}
    assert rows["warptile"].status == "fail" and "incorrect" in rows["warptile"].detail
    assert rows["tiled"].status == "pass"
