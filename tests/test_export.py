import subprocess

import pytest
from helpers import have_nvcc
from test_results import GPU, _entry

from autotune.export import export
from autotune.results import update_record
from autotune.types import Problem, UserError

HARNESS = """#include "tuned.h"
int main() {
    float *a = 0, *b = 0, *c = 0;
    cudaMalloc(&a, 4); cudaMalloc(&b, 4); cudaMalloc(&c, 4);
    return (int)autotune_sgemm(1, 1, 1, 1.0f, a, b, 0.0f, c);
}
"""

WARPTILE = dict(BM=128, BN=256, BK=8, WARPS_M=2, WARPS_N=4, LANES_N=8, TM=8, TN=4, STAGES=4, PAD_A=4, PAD_B=0,
                GROUP_M=8, SPLITK=4, MINB=1, PREFETCH=0, MMA_ORDER=0)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("family, params", [("vectorized", dict(BM=128, BN=128, BK=16, TM=8, TN=8)),
                                            ("warptile", WARPTILE),
                                            ("warptile", {**WARPTILE, "SPLITK": 1, "STREAMK": 1}),
                                            ("warptile", {**WARPTILE, "SPLITK": 1, "STREAMK": 2}),
                                            ("warptile", {**WARPTILE, "SPLITK": 1, "STREAMK": 3}),
                                            ("warptile", {**WARPTILE, "SPLITK": 1, "STREAMK": 4})])
def test_exported_header_compiles_and_links_with_nvcc(tmp_path, h100, family, params):
    P = Problem(1000, 1000, 1000)
    update_record(tmp_path, GPU, P, {family: _entry(family, params, 30000.0, h100)})
    out, entry = export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h")
    text = out.read_text()
    for k, v in params.items():
        assert f"#define AUTOTUNE_{k} {v}\n" in text
    if family == "warptile":  # > 48 KB shared memory: the opt-in
        assert "cudaFuncAttributeMaxDynamicSharedMemorySize" in text
    if params.get("SPLITK", 1) > 1:  # split-K: C is scaled first
        assert "_scale_c<<<" in text
    if family == "warptile":  # B to a 16-byte pitch when N % 4 != 0 (in the workspace)
        assert "_pack_b<<<" in text and "cudaMallocAsync" in text
    if params.get("STREAMK"):  # a grid of at most the resident blocks, a zeroed stream-ordered workspace
        assert "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in text and "_scale_c<<<" not in text
        assert "cudaMallocAsync" in text and "cudaMemsetAsync" in text and "cudaFreeAsync" in text
    # A split launch: the tail's tiles of C scaled, the main kernel where it has tiles, then the tail.
    assert ("_scale_tiles<<<" in text and "_tail<<<" in text and "if (grid.x > 0)" in text) == \
        (params.get("STREAMK") == 2)
    (tmp_path / "main.cu").write_text(HARNESS)
    r = subprocess.run(["nvcc", "-arch=sm_90", "-o", str(tmp_path / "main"), str(tmp_path / "main.cu")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_export_of_an_untuned_shape_lists_the_tuned_ones(tmp_path, h100):
    update_record(tmp_path, GPU, Problem(1000, 1000, 1000), {"tiled": _entry("tiled", {"TILE": 32}, 1.0, h100)})
    with pytest.raises(UserError, match="tuned shapes: 1000x1000x1000"):
        export(tmp_path, GPU["slug"], Problem(64, 64, 64), tmp_path / "x.h")
