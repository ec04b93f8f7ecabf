"""autotune report: a section per precision tier against its own baseline, the clock where recorded,
and plots of a size a person can read, on fixture records and on the committed results."""

import re
import struct

import pytest
from helpers import GPU, ROOT
from helpers import record_entry as _entry

from autotune.core.types import Problem
from autotune.records.report import write_report
from autotune.records.store import update_record

pytest.importorskip("matplotlib")

# A figure of a report is at most this many pixels across and down: COLUMNS columns of ROWS
# shapes (records/plots.py), whatever the number of shapes.
MAX_W, MAX_H = 1800, 1400
HEADINGS = {
    "highest": "## highest: FP32 on the CUDA cores, against cuBLAS FP32 (SGEMM)",
    "high": "## high: FP32-accurate tensor-core, against cuBLAS FP32 (SGEMM)",
    "medium": "## medium: TF32 tensor-core, against cuBLAS TF32",
}


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _record(root, h100, problem, gflops, path=None, clock=None, families=("tiled",)):
    entries = {}
    for i, fam in enumerate(families):
        params = {"TILE": 32} if fam == "tiled" else {"BM": 64, "BN": 64, "BK": 8, "TM": 8}
        entry = _entry(fam, params, gflops * (1 - 0.3 * i), h100, problem)
        if path:
            entry["cublas"]["path"] = path
        entry.update((clock or {}).get("kernel", {}))
        entry["cublas"].update((clock or {}).get("cublas", {}))
        entries[fam] = entry
    update_record(root, GPU, problem, entries)


@pytest.fixture
def three_tiers(tmp_path, h100):
    """80 strict shapes (more than one figure holds), 3 of high against FP32 gemm, 3 of medium
    against TF32 cuBLAS, one of them timed throttled; two families at one shape."""
    root = tmp_path / "results"
    for i in range(80):
        _record(
            root, h100, Problem(64 + 8 * i, 512, 256), 20000.0 + 300 * i, families=("tiled", "coarse1d")[: 1 + (i == 5)]
        )
    clock = {"kernel": {"sm_clock_mhz": 1755, "power_w": 699.0, "throttle": ["sw_power_cap"]},
             "cublas": {"sm_clock_mhz": 1980, "power_w": 520.0, "throttle": []}}  # fmt: skip
    for n in (1024, 2048, 4096):
        _record(root, h100, Problem(n, n, n, precision="high"), 60000.0, path="gemm")
        _record(root, h100, Problem(n, n, n, precision="medium"), 25000.0, path="gemm_tf32", clock=clock)
    return root


def test_a_section_per_tier_each_against_its_own_baseline(tmp_path, three_tiers):
    md = write_report(three_tiers, GPU["slug"], tmp_path / "out").read_text()
    heads = [line for line in md.splitlines() if line.startswith("## ") and ": " in line]
    assert heads == [HEADINGS["highest"], HEADINGS["high"], HEADINGS["medium"]]  # strictest first
    medium = md[md.index(HEADINGS["medium"]) :]
    # Each shape under its tier without the tier in its name; ratios against that tier's cuBLAS.
    assert "3 shapes: geomean 0.83x cuBLAS TF32, lowest 0.83x at 1024x1024x1024, 3 below 1.0x" in medium
    assert re.search(
        r"^\| 2048x2048x2048 \| tiled \| 25\.0 \| 30\.0 \| 0\.83x \| 1755\* / 1980 \| 699\* / 520 \|", medium, re.M
    )
    high = md[md.index(HEADINGS["high"]) : md.index(HEADINGS["medium"])]
    assert "| 4096x4096x4096 | tiled | 60.0 | 30.0 | 2.00x | - / - | - / - |" in high  # no clock recorded
    assert "Explore the studies" not in md and "optuna-dashboard" not in md  # no studies here


def test_plots_are_of_a_size_a_person_can_read(tmp_path, three_tiers):
    out = tmp_path / "out"
    md = write_report(three_tiers, GPU["slug"], out).read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    # 80 strict shapes: 75 in a figure, the rest in a second; one shape with two families.
    assert pngs == ["families_highest.png", "shapes_high.png", "shapes_highest.png", "shapes_highest_2.png",
                    "shapes_medium.png"]  # fmt: skip
    for name in pngs:
        w, h = png_size(out / name)
        assert 400 <= w <= MAX_W and 150 <= h <= MAX_H, (name, w, h)
        assert f"]({name})" in md
    w, h = png_size(out / "shapes_highest.png")
    assert w > 1400 and h > 800  # three full columns of 25


@pytest.mark.parametrize("gpu", ["nvidia-h100-80gb-hbm3", "nvidia-h200"])
def test_the_report_of_the_committed_results(tmp_path, gpu):
    results = ROOT / "results"
    if not (results / gpu).is_dir():
        pytest.skip(f"no committed results for {gpu}")
    from autotune.records.results import iter_records

    tiers = {Problem(**r["problem"]).precision for _p, r in iter_records(results, gpu)}
    out = tmp_path / "out"
    md = write_report(results, gpu, out).read_text()
    assert [h for h in md.splitlines() if h in HEADINGS.values()] == [HEADINGS[t] for t in HEADINGS if t in tiers]
    assert "Strict FP32 SGEMM" not in md
    for png in out.glob("*.png"):
        w, h = png_size(png)
        assert w <= MAX_W and h <= MAX_H, (png.name, w, h)
