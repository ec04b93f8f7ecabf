"""The INT8 kernels of the Ozaki moduli compile for sm_90 without a GPU: the reference
(templates/_ozaki_int8.cu.j2) and the pipelined one (_ozaki_int8_fast.cu.j2), for uint8 and int32
product planes, their registers, spills and shared memory, and tensor-core INT8 instructions (and
cp.async, ldmatrix, the planes' stores) in their SASS."""

import pytest

from autotune.gpu.compile import compile_source
from autotune.kernels.family import known_families
from autotune.kernels.ozaki_int8 import (
    FAST_KERNEL,
    KERNEL,
    MAX_SMEM,
    OUTPUTS,
    FastTile,
    Int8Tile,
    fast_source,
    output_env,
    source,
)
from autotune.kernels.sass import analyze_cubin, find_cuobjdump

# The int32 renders (the raw mode the device tests check the GEMM by) compile slowly and are not
# what OzakiGemm runs: with the slow tests.
OUT_CASES = [o if o == "uint8" else pytest.param(o, marks=pytest.mark.slow) for o in OUTPUTS]
TILES = (Int8Tile(), Int8Tile(64, 64, 32, 2, 2), Int8Tile(128, 256, 64, 2, 4))
# The default tile in every run; the others (about 10 s of NVRTC each) with the slow tests.
FAST_TILES = (
    FastTile(),
    pytest.param(FastTile(128, 128, 64, 2, 2, 4), marks=pytest.mark.slow),
    pytest.param(FastTile(128, 128, 128, 2, 4, 4), marks=pytest.mark.slow),
    FastTile(64, 64, 32, 2, 2, 3),
)


@pytest.mark.parametrize("out", OUT_CASES)
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t.bm}x{t.bn}x{t.bk}")
def test_the_int8_kernel_compiles_for_sm90_without_spills(tile, out):
    c = compile_source(source(tile, out=out), "sm_90", KERNEL)
    r = c.resources
    print(f"{tile} {out}: {r.registers} registers, {r.spill_bytes} spill bytes, {r.smem_static_bytes} B shared")
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


@pytest.mark.parametrize("out", OUT_CASES)
@pytest.mark.parametrize("tile", FAST_TILES, ids=lambda t: f"{t.bm}x{t.bn}x{t.bk}s{t.stages}")
def test_the_fast_kernel_compiles_for_sm90_without_spills(tile, out):
    c = compile_source(fast_source(tile, out=out), "sm_90", FAST_KERNEL)
    r = c.resources
    print(f"{tile} {out}: {r.registers} registers, {r.spill_bytes} spill bytes, {tile.smem_bytes} B dynamic shared")
    assert r.spill_bytes == 0 and r.stack_bytes == 0
    assert r.smem_static_bytes == 0 and tile.smem_bytes <= MAX_SMEM  # all of it dynamic, opted in
    assert r.registers <= 255 and r.registers * tile.threads <= 65536


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
def test_the_fast_kernel_pipelines_into_the_int8_tensor_cores():
    tile = FastTile()
    stats = analyze_cubin(compile_source(fast_source(tile), "sm_90", FAST_KERNEL).cubin, FAST_KERNEL)
    ops = stats.total
    mi, ni, steps = tile.bm // tile.warps_m // 16, tile.bn // tile.warps_n // 8, tile.bk // 32
    # A stage unrolled: one m16n8k32 per mma tile a k-step, one ldmatrix x4 per A tile and per
    # two B tiles a k-step.
    assert {op: n for op, n in ops.items() if op.startswith("IMMA")} == {"IMMA.16832.S8.S8": mi * ni * steps}
    assert {op: n for op, n in ops.items() if op.startswith("LDSM")} == {"LDSM.16.M88.4": (mi + ni // 2) * steps}
    # The copies of the STAGES - 1 prologue tiles and of one tile a loop are cp.async (16 bytes,
    # zero-filled at the edges).
    per_tile = (tile.bm + tile.bn) * tile.bk // 16 // tile.threads
    assert ops.get("LDGSTS.E.BYPASS.128.ZFILL") == per_tile * tile.stages
    assert stats.summary()["local_memory"] == 0


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
@pytest.mark.parametrize(("out", "pair", "one"), [("uint8", "STG.E.U16", "STG.E.U8"), ("int32", "STG.E.64", "STG.E")])
def test_the_planes_are_stored_as_their_type_two_of_a_row_at_once(out, pair, one):
    """C's stores in the fast kernel's SASS: pairs of a row as one store, single elements at the edges."""
    tile = FastTile(64, 64, 32, 2, 2, 3)
    ops = analyze_cubin(compile_source(fast_source(tile, out=out), "sm_90", FAST_KERNEL).cubin, FAST_KERNEL).total
    stores = {op for op, n in ops.items() if op.startswith("STG")}
    assert stores == {pair, one}, stores


def test_the_output_type_is_uint8_unless_asked_and_nothing_else():
    """uint8 planes by default; int32 (the raw sums' type) renders the same kernel with int C."""
    tile = Int8Tile()
    assert "typedef unsigned char at_out;" in source(tile) and "typedef uchar2 at_out2;" in fast_source()
    assert source(tile) == source(tile, out="uint8") and fast_source() == fast_source(out="uint8")
    wide = fast_source(out="int32")
    assert "typedef int at_out;" in wide and "typedef int2 at_out2;" in wide and "unsigned char at_out" not in wide
    # The two kernels are the same text from their signature on: only the typedefs differ.
    narrow = fast_source()
    assert narrow[narrow.index('extern "C"') :] == wide[wide.index('extern "C"') :]
    for bad in ("int8", "int64", "u8"):
        with pytest.raises(ValueError, match="one of uint8, int32"):
            output_env(bad)
        with pytest.raises(ValueError, match="one of uint8, int32"):
            source(tile, out=bad)


def test_a_fast_tile_that_cannot_work_is_refused():
    for bad, why in (
        (dict(bm=48, warps_m=2), "16 x 16"),
        (dict(bk=96), "32, 64 or 128"),
        (dict(stages=1), "2 to 6 stages"),
        (dict(bm=32, bn=64, bk=32, warps_m=2, warps_n=2), "split evenly"),
        (dict(bm=256, bn=256, warps_m=2, warps_n=2, stages=2), "registers"),
        (dict(stages=5), "227 KiB"),
    ):
        with pytest.raises(ValueError, match=why):
            FastTile(**bad)
    assert FastTile().grid(300, 520, 8) == (3, 3, 8)


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
