"""benchmarks/readme_tables.py: the README's results table from stored records, and its check."""

import subprocess
import sys
from pathlib import Path

import pytest

from autotune.core.types import Config, Measurement, Problem, Status
from autotune.records.results import make_entry, update_record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import readme_tables  # noqa: E402 - after the sys.path line that finds benchmarks/

GPU = {"name": "NVIDIA H200", "slug": "nvidia-h200", "arch": "sm_90"}
BASE = dict(BM=128, BN=256, BK=16, STAGES=7, MMA_ORDER=2, SCHEDULE="data_parallel", SPLITK=1, PACKB=1)


def _store(root, shape, gflops, cublas, **params):
    p = Problem.parse(shape)
    m = Measurement(
        Config.make("warptile", {**BASE, **params}),
        p,
        Status.OK,
        time_ms=p.flops / gflops / 1e6,
        repeats=5,
        gflops=gflops,
        error=1.1e-6,
    )
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


def test_check_finds_a_drifted_row_and_passes_a_regenerated_table(results, tmp_path):
    table = "\n".join(readme_tables.table(results, "nvidia-h200"))
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# x\n\n## Results on an H100\n\n{table}\n\n## Results on an H200 (strict)\n\nText.\n\n{table}\n"
    )
    assert readme_tables.check(readme, results, "nvidia-h200") == []
    drifted = table.replace("| 34.1 | 32.0 | 1.07x |", "| 34.0 | 32.0 | 1.06x |")
    readme.write_text(f"## Results on an H200\n\n{drifted}\n\n## Results on an H100\n\n{table}\n")
    (diff,) = readme_tables.check(readme, results, "nvidia-h200")
    assert diff.startswith("1000x1000x1000: README has '| 1000x1000x1000 |") and "34.0" in diff
    r = subprocess.run(
        [sys.executable, "benchmarks/readme_tables.py", "--results", str(results), "--check", str(readme)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "1000x1000x1000: README has" in r.stdout
    readme.write_text("## Results on an H200\n\nno table\n")
    assert "no table headed" in readme_tables.check(readme, results, "nvidia-h200")[0]
