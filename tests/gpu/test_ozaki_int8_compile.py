"""The INT8 kernel of one Ozaki modulus (templates/_ozaki_int8.cu.j2) compiles for sm_90 without a
GPU: its registers, spills and shared memory, and tensor-core INT8 instructions in its SASS."""

import pytest

from autotune.gpu.compile import compile_source
from autotune.kernels.family import known_families
from autotune.kernels.ozaki_int8 import KERNEL, Int8Tile, source
from autotune.kernels.sass import analyze_cubin, find_cuobjdump

TILES = (Int8Tile(), Int8Tile(64, 64, 32, 2, 2), Int8Tile(128, 256, 64, 2, 4))


@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t.bm}x{t.bn}x{t.bk}")
def test_the_int8_kernel_compiles_for_sm90_without_spills(tile):
    c = compile_source(source(tile), "sm_90", KERNEL)
    r = c.resources
    print(f"{tile}: {r.registers} registers, {r.spill_bytes} spill bytes, {r.smem_static_bytes} B shared")
    assert r.spill_bytes == 0 and r.stack_bytes == 0
    assert r.smem_static_bytes == tile.smem_bytes
    assert r.registers <= 255 and r.registers * tile.threads <= 65536


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
def test_the_int8_kernel_runs_on_the_int8_tensor_cores():
    tile = TILES[0]
    stats = analyze_cubin(compile_source(source(tile), "sm_90", KERNEL).cubin, KERNEL)
    imma = {op: n for op, n in stats.total.items() if op.startswith("IMMA")}
    # One m16n8k32 per mma tile of a warp per k-step of a stage, unrolled.
    mi, ni = tile.bm // tile.warps_m // 16, tile.bn // tile.warps_n // 8
    assert imma == {"IMMA.16832.S8.S8": mi * ni * tile.bk // 32}, imma
    assert stats.summary()["local_memory"] == 0


def test_a_tile_that_cannot_work_is_refused_and_the_kernel_is_no_family():
    for bad, why in (
        (dict(bm=48, warps_m=2), "whole 16 x 8"),
        (dict(bk=48), "k-steps of 32"),
        (dict(pad=8), "16-byte aligned"),
        (dict(bm=256, bn=256, warps_m=1, warps_n=1), "registers"),
    ):
        with pytest.raises(ValueError, match=why):
            Int8Tile(**bad)
    # Not searched or dispatched until it has its declaration: the family list leaves it out.
    assert not [f for f in known_families() if "ozaki" in f]
