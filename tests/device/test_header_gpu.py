"""On the GPU: examples/sgemm_dispatch.cu with the dispatching header of the checkout's records for
this GPU, every result checked against cublasSgemm, each shape's time beside cuBLAS's."""

import subprocess
from pathlib import Path

import pytest
from helpers import have_nvcc

from autotune.dispatch.header import export_dispatch
from autotune.dispatch.table import table_for
from autotune.records.results import live_gpu_slug

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_the_dispatch_example_matches_cublas_at_a_seeded_draw(tmp_path):
    slug = live_gpu_slug()
    if slug is None or not (ROOT / "results" / slug).is_dir():
        pytest.skip(f"no shipped results for this GPU ({slug})")
    # Six records spread over the folder's sizes, small to large: nvcc builds a header in minutes
    # per few dozen kernels, and the dispatch's choices among six tuned shapes are the same code.
    records = sorted(table_for(ROOT / "results", slug).records, key=lambda r: r[0].flops)
    picked = [records[round(i * (len(records) - 1) / 5)][0] for i in range(6)] if len(records) > 6 else None
    export_dispatch(ROOT / "results", slug, tmp_path / "tuned_sgemm.h", shapes=picked)
    exe = tmp_path / "sgemm_dispatch"
    build = subprocess.run(
        [
            "nvcc",
            "-O2",
            "-arch=sm_90",
            f"-I{tmp_path}",
            str(ROOT / "examples" / "sgemm_dispatch.cu"),
            "-lcublas",
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    # The same draw with padded leading dimensions (most not a multiple of 4), then rounded up to
    # 16-byte columns: the two apart say what the pitches cost.
    for mode in ("padded", "aligned"):
        run = subprocess.run([str(exe), "57", "24", mode], capture_output=True, text=True, timeout=600)
        print(run.stdout)  # the figures, for the log (-s)
        assert run.returncode == 0 and f"{mode} leading dimensions); all ok" in run.stdout, run.stdout + run.stderr
    bad = subprocess.run([str(exe), "57", "24", "tight"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout.startswith("usage:"), bad.stdout
    # One named shape: 4096^3 with every leading dimension one past the rows (not a multiple of 4).
    one = subprocess.run([str(exe), "4096x4096x4096", "NT", "1"], capture_output=True, text=True, timeout=300)
    print(one.stdout)
    assert one.returncode == 0 and "NT, leading dimensions 1 past the rows" in one.stdout, one.stdout + one.stderr
    assert "all ok" in one.stdout, one.stdout
    for argv in (["4096x4096x4096", "NX"], ["4096x4096", "NN"], ["4096x4096x4096", "NN", "65"]):
        bad = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and bad.stdout.startswith("usage:"), (argv, bad.stdout)
