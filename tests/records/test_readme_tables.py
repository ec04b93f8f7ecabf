"""benchmarks/readme_tables.py: the results page's tables (results/README.md) from stored records, and its check."""

import subprocess
import sys
from pathlib import Path

import pytest

from autotune.core.types import Config, Measurement, Problem, Status
from autotune.records.store import make_entry, update_record

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import readme_tables  # noqa: E402 - after the sys.path line that finds benchmarks/

GPU = {"name": "NVIDIA H200", "slug": "nvidia-h200", "arch": "sm_90"}
BASE = dict(BM=128, BN=256, BK=16, STAGES=7, MMA_ORDER=2, SCHEDULE="data_parallel", SPLITK=1, PACKB=1)


def _store(root, shape, gflops, cublas, **params):
    p = Problem.parse(shape)
    cfg = Config.make("warptile", {**BASE, **params})
    m = Measurement(cfg, p, Status.OK, time_ms=p.flops / gflops / 1e6, repeats=5, gflops=gflops, error=1.1e-6)
    entry = make_entry(m, {"gflops": cublas}, search={}, versions={}, command="", limits={})
    update_record(root, GPU, p, {"warptile": entry})


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "results"
    _store(root, "4096", 51600.0, 51440.0, SCHEDULE="split_launch")
    _store(root, "4097", 44200.0, 43900.0, STAGES=3, MMA_ORDER=1, SPLITK=4, BN=128)
    _store(root, "1000", 34100.0, 32000.0, SCHEDULE="split_persistent", BN=64)
    _store(root, "64x64x8", 10.0, 20.0)  # not in the sweep: after it
    return root


def test_rows_in_sweep_order_with_their_schedule(results):
    lines = readme_tables.table(results, "nvidia-h200")
    assert lines[:2] == [readme_tables.HEADER, readme_tables.RULE]
    assert lines[2:] == [
        "| 4096x4096x4096 | 128x256x16, 7 stages, serpentine, split launch | 51.6 | 51.4 | 1.00x (1.003) | 1.1e-06 |",
        "| 1000x1000x1000 | 128x64x16, 7 stages, serpentine, split launch in one kernel | 34.1 | 32.0 | 1.07x "
        "| 1.1e-06 |",
        "| 4097x4097x4097 | 128x128x16, 3 stages, column-major, split-K 4, B packed | 44.2 | 43.9 | 1.01x | 1.1e-06 |",
        "| 64x64x8 | 128x256x16, 7 stages, serpentine | 0.0 | 0.0 | 0.50x | 1.1e-06 |",
    ]


def test_check_finds_a_drifted_row_and_passes_a_regenerated_page(results, tmp_path):
    page = results / "README.md"  # where the page lives: beside the GPU folders it describes
    page.write_text(f"# Results\n\nText.\n\n{readme_tables.BEGIN}\n{readme_tables.END}\n\nAfter.\n")
    readme_tables.write(page, results)
    text = page.read_text()
    assert text.startswith("# Results\n\nText.\n\n") and text.endswith("\n\nAfter.\n")  # the rest is kept
    assert "## NVIDIA H200\n" in text and "\n".join(readme_tables.table(results, "nvidia-h200")) in text
    assert readme_tables.check(page, results) == []
    page.write_text(text.replace("| 34.1 | 32.0 | 1.07x |", "| 34.0 | 32.0 | 1.06x |"))
    diff = readme_tables.check(page, results)
    assert [d for d in diff if d.startswith("-| 1000x1000x1000 |") and "34.0" in d]
    assert [d for d in diff if d.startswith("+| 1000x1000x1000 |") and "34.1" in d]
    cmd = [sys.executable, "benchmarks/readme_tables.py", "--results", str(results), "--check", str(page)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and "-| 1000x1000x1000 |" in r.stdout and "--write" in r.stdout
    page.write_text("# Results\n\nno tables\n")
    assert "no generated block" in readme_tables.check(page, results)[0]


def test_the_page_in_the_results_folder_is_no_gpu_and_no_record(results):
    """results/README.md sits beside the GPU folders: every reader of the folder passes it by."""
    from autotune.records.results import gpu_dirs, iter_records

    (results / "README.md").write_text("# Results\n")
    assert gpu_dirs(results) == ["nvidia-h200"]
    assert len(list(iter_records(results, "nvidia-h200"))) == 4
    cmd = [sys.executable, "-m", "autotune", "list", "--results", str(results)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "nvidia-h200" in r.stdout and "README" not in r.stdout


def test_other_families_show_their_params_but_the_layout_and_the_batch():
    entry = {"config": {"family": "fewrows", "params": {"BATCHED": 0, "MR": 4, "TRANS_A": 1, "TRANS_B": 0, "WK": 1}}}
    assert readme_tables.schedule(entry, Problem.parse("5371x512x208_tn")) == "fewrows MR=4 WK=1"
