"""The wgmma INT8 kernel of the Ozaki moduli (templates/_ozaki_int8_wgmma.cu.j2) without a GPU.

Its tiles are checked; it renders and NVRTC builds it for sm_90a without spills. Its data path is
replayed in NumPy: the producer's copies into shared memory (the template's lines, copied here and
checked to be in it word for word), and wgmma's reads as the PTX ISA defines a K-major operand of
a shared-memory descriptor with the 128-byte swizzle (the descriptor decoded from its bit fields,
the swizzle applied to the address), the reduction every K_CHUNK and the epilogue's fragment
layout: every C element must equal NumPy's int64 product modulo m.
"""

import numpy as np
import pytest

from autotune.gpu.compile import compile_source
from autotune.kernels.family import TEMPLATE_DIR
from autotune.kernels.ozaki import K_CHUNK
from autotune.kernels.ozaki_int8 import MAX_SMEM, OUTPUTS
from autotune.kernels.ozaki_wgmma import (
    ROW,
    WGMMA_ARCH,
    WGMMA_KERNEL,
    WGMMA_TEMPLATE,
    WgmmaTile,
    wgmma_source,
)
from tests.kernels.test_ozaki_int8_model import int8_case, int8_product, int8s, tails_case, tile_id, worst_case

# --- the PTX ISA's definitions, independent of the kernel ---------------------------------------


def decode(desc):
    """Return (start, leading, stride, swizzle) of a wgmma matrix descriptor, addresses in bytes.

    Bits 0-13: start address >> 4; 16-29: leading byte offset >> 4; 32-45: stride byte offset >> 4;
    49-51: base offset (0 here); 62-63: swizzle mode (1: 128-byte).
    """
    assert (desc >> 49) & 7 == 0
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4, desc >> 62


def wgmma_reads(smem, desc, rows):
    """The rows x 32 int8 a K-major operand of the 128-byte swizzle reads from `smem` at `desc`.

    Row r, byte b: 8-row groups `stride` apart, rows 128 bytes apart within a group; then bits
    4-6 of the address XORed with bits 7-9 (the swizzle is of the shared-memory address itself).
    """
    start, _, stride, swizzle = decode(desc)
    assert swizzle == 1
    r, b = np.meshgrid(np.arange(rows), np.arange(32), indexing="ij")
    logical = start + (r // 8) * stride + (r % 8) * 128 + b
    return smem[logical ^ (((logical >> 7) & 7) << 4)]


def at_desc(addr):
    """The template's at_desc (templates/_hopper.cuh.j2), transcribed."""
    return ((addr & 0x3FFFF) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)


def fragment(w, lane, i):
    """(row, column) of accumulator i of lane `lane` in warp w of the warpgroup: wgmma's D layout."""
    g, t = divmod(lane, 4)
    return 16 * w + g + 8 * ((i % 4) // 2), 8 * (i // 4) + 2 * t + i % 2


# --- the kernel, line by line -------------------------------------------------------------------

KERNEL_LINES = (
    "constexpr int PIECES = ROWS * AT_CH, STEP = 128 / AT_CH;",
    "const int c = p % AT_CH, r_first = p / AT_CH, gk = k0 + 16 * c;",
    "const unsigned at = (c / 8) * (ROWS * {{ ROW }}) + r_first * {{ ROW }} + 16 * ((c % 8) ^ (r_first % 8));",
    "const int left = K - gk, in_k = left < 0 ? 0 : left < 16 ? left : 16;",
    "for (int i = 0; i < (PIECES + 127) / 128; ++i) {",
    "const int r = r_first + i * STEP, gr = r0 + r;",
    "if (PIECES % 128 != 0 && r >= ROWS) break;",
    "const unsigned dst = at + i * (STEP * {{ ROW }});",
    "const int bytes = gr < rows ? in_k : 0;",
    "at_load_swizzled<{{ BN }}>(st + {{ BM * BK }}, sp + {{ BM * BK }}, B, ldb, N, K, bn, kt * {{ BK }}, vec, p);",
    "if (m > 0 && kt > 0 && kt % (AT_K_CHUNK / {{ BK }}) == 0) {",
    "const unsigned a_tile = sbase + s * {{ STAGE_BYTES }} + c * {{ 64 * ROW }};",
    "const unsigned b_tile = sbase + s * {{ STAGE_BYTES }} + {{ BM * BK }};",
    "for (int j = 0; j < {{ SUBS }}; ++j)",
    "at_wgmma_s8(acc, at_desc(a_tile + j * {{ BM * ROW }} + 32 * kk), at_desc(b_tile + j * {{ BN * ROW }} + 32 * kk));",
    "const int row = bm + 64 * c + 16 * w + g + 8 * h;",
    "const int col = bn + 8 * j + 2 * t;",
    "int v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];",
)
DESC_LINE = (
    "return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | "
    "((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);"
)


def _flat(text):
    return " ".join(text.split())


# The kernel's template and the pieces it includes (shared with the TMA-fed kernel).
TEMPLATE_FILES = (
    WGMMA_TEMPLATE,
    "_ozaki_int8_wgmma_prologue.cuh.j2",
    "_ozaki_int8_wgmma_s8.cuh.j2",
    "_ozaki_int8_wgmma_consumer.cuh.j2",
)


def test_the_replay_copies_the_templates_lines():
    text = _flat(" ".join((TEMPLATE_DIR / name).read_text() for name in TEMPLATE_FILES))
    missing = [line for line in KERNEL_LINES if _flat(line) not in text]
    assert not missing, missing
    assert _flat(DESC_LINE) in _flat(wgmma_source())


def load(smem, s, x, rows_tile, bk, r0, k0):
    """at_load_swizzled<ROWS> by each of the 128 producer threads into the tile at `s`: its writes."""
    ch, rows, K = bk // 16, x.shape[0], x.shape[1]
    pieces, step = rows_tile * ch, 128 // ch
    writes = []
    for p in range(128):
        c, r_first, gk = p % ch, p // ch, k0 + 16 * (p % ch)
        at = (c // 8) * (rows_tile * ROW) + r_first * ROW + 16 * ((c % 8) ^ (r_first % 8))
        left = K - gk
        in_k = 0 if left < 0 else min(left, 16)
        for i in range(-(-pieces // 128)):
            r = r_first + i * step
            gr = r0 + r
            if pieces % 128 != 0 and r >= rows_tile:
                break
            dst = at + i * (step * ROW)
            nbytes = in_k if gr < rows else 0
            chunk = np.zeros(16, np.int8)
            if nbytes:  # none read: the row is past the matrix or the chunk past K
                chunk[:nbytes] = x[gr, gk : gk + nbytes]
            smem[s + dst : s + dst + 16] = chunk
            writes.append(s + dst)
    return writes


def replay(tile, a, b, m, k_chunk=K_CHUNK, copy=load):
    """Return the kernel's C for int8 A (M x K) and B (N x K) modulo m (0: the raw sums).

    `copy` fills a tile of a stage as `load` does (the TMA-fed kernel's test passes its own).
    """
    (M, K), N = a.shape, b.shape[0]
    c_out = np.full((M, N), -7, np.int64)
    writes = np.zeros((M, N), np.int64)
    gx, gy, _ = tile.grid(M, N)
    kt_all = -(-K // tile.bk)
    sbase = 3 * 1024  # a 1024-aligned stage base off zero: the swizzle reads address bits
    for by, bx in np.ndindex(gy, gx):
        bm, bn = by * tile.bm, bx * tile.bn
        smem = np.full(sbase + tile.stages * tile.stage_bytes, 99, np.int8)
        acc = np.zeros((tile.consumers, 64, tile.bn), np.int64)
        for kt in range(kt_all):
            s = kt % tile.stages
            st = sbase + s * tile.stage_bytes
            wa = copy(smem, st, a, tile.bm, tile.bk, bm, kt * tile.bk)
            wb = copy(smem, st + tile.bm * tile.bk, b, tile.bn, tile.bk, bn, kt * tile.bk)
            # The copies cover the stage's tiles once each, 16 bytes at a time.
            assert sorted(wa + wb) == list(range(st, st + tile.stage_bytes, 16))
            if m > 0 and kt > 0 and kt % (k_chunk // tile.bk) == 0:
                acc = np.fmod(acc, m)
            for c in range(tile.consumers):
                a_tile = st + c * 64 * ROW
                b_tile = st + tile.bm * tile.bk
                for j in range(tile.bk // ROW):
                    for kk in range(4):
                        fa = wgmma_reads(smem, at_desc(a_tile + j * tile.bm * ROW + 32 * kk), 64)
                        fb = wgmma_reads(smem, at_desc(b_tile + j * tile.bn * ROW + 32 * kk), tile.bn)
                        acc[c] += fa.astype(np.int64) @ fb.astype(np.int64).T
            assert np.abs(acc).max(initial=0) < max(m, 1) + k_chunk * 128 * 128 <= 2**31
        for c, w, lane, j, h in np.ndindex(tile.consumers, 4, 32, tile.bn // 8, 2):
            g, t = divmod(lane, 4)
            row, col = bm + 64 * c + 16 * w + g + 8 * h, bn + 8 * j + 2 * t
            for e, i in enumerate((4 * j + 2 * h, 4 * j + 2 * h + 1)):
                fr, fc = fragment(w, lane, i)
                v = int(acc[c, fr, fc])
                if m > 0:
                    v = int(np.fmod(v, m))
                    v += m if v < 0 else 0
                if row < M and col + e < N:
                    c_out[row, col + e] = v
                    writes[row, col + e] += 1
    assert (writes == 1).all(), "every element of C written once"
    return c_out


SMALL = (WgmmaTile(64, 16, 128, 2), WgmmaTile(128, 24, 256, 3), WgmmaTile(64, 48, 128, 4))


@pytest.mark.parametrize("tile", SMALL, ids=tile_id)
@pytest.mark.parametrize("shape", [(1, 1, 1), (70, 45, 100), (64, 48, 128), (130, 50, 300)])
@pytest.mark.parametrize("m", [0, 256, 251])
def test_the_replayed_kernel_is_exact(tile, shape, m):
    a, b, want = int8_case(shape, m)
    assert np.array_equal(replay(tile, a, b, m), want)


def test_the_default_tile_replayed_with_tails():
    """The tile the driver runs (128 x 256 x 128, 2 consumers) at M, N, K off its multiples."""
    a, b, want = tails_case()
    assert np.array_equal(replay(WgmmaTile(), a, b, 253), want)


def test_the_chunk_reduction_keeps_the_sum_exact():
    """With a K_CHUNK of 128 the reduction runs every stage; worst-case residues stay exact."""
    a, b = worst_case(16, 5 * 128 + 17)
    for m in (256, 253):
        assert np.array_equal(replay(SMALL[0], a, b, m, k_chunk=128), int8_product(a, b, m))


def test_a_read_without_the_swizzle_is_caught(monkeypatch):
    """The replay can fail: wgmma reading the rows unswizzled (the copies' XOR unmatched) is wrong."""
    rng = np.random.default_rng(1)
    a, b = int8s(rng, 64, 128), int8s(rng, 16, 128)

    def unswizzled(smem, desc, rows):
        start, _, stride, _ = decode(desc)
        r, k = np.meshgrid(np.arange(rows), np.arange(32), indexing="ij")
        return smem[start + (r // 8) * stride + (r % 8) * 128 + k]

    monkeypatch.setitem(globals(), "wgmma_reads", unswizzled)
    assert not np.array_equal(replay(SMALL[0], a, b, 0), int8_product(a, b, 0))
    monkeypatch.undo()
    assert np.array_equal(replay(SMALL[0], a, b, 0), int8_product(a, b, 0))


# --- the tile's checks and NVRTC ----------------------------------------------------------------


def test_a_tile_that_cannot_work_is_refused_with_its_reason():
    for bad, why in (
        (dict(bm=96), "64 rows per consumer"),
        (dict(bm=320, bn=64), "1 to 4 of them"),
        (dict(bn=40), "8, 16, 24 or a multiple of 16"),
        (dict(bn=272), "up to 256"),
        (dict(bk=48), "multiple of 32"),
        (dict(bk=64), "128 or 256"),
        (dict(stages=1), "2 to 8 stages"),
        (dict(stages=5), "227 KiB"),
        (dict(bm=256, bn=256, stages=2), "registers"),
    ):
        with pytest.raises(ValueError, match=why) as err:
            WgmmaTile(**bad)
        assert str(err.value).startswith("wgmma INT8 tile WgmmaTile(")
    t = WgmmaTile()
    assert (t.threads, t.consumers, t.grid(300, 520, 8)) == (384, 2, (3, 3, 8))
    assert t.smem_bytes + 1024 <= MAX_SMEM


def test_it_renders_each_tile():
    for tile in SMALL + (WgmmaTile(),):
        src = wgmma_source(tile)
        assert f"BM = {tile.bm}, BN = {tile.bn}, BK = {tile.bk}, {tile.stages} stages" in src and "{{" not in src
        assert f"wgmma.mma_async.sync.aligned.m64n{tile.bn}k32.s32.s8.s8" in src


@pytest.mark.parametrize("out", OUTPUTS)
@pytest.mark.parametrize("tile", [WgmmaTile(), WgmmaTile(64, 128, 128, 6)], ids=tile_id)
def test_it_compiles_for_sm_90a_without_spills(tile, out):
    assert_builds_without_spills(wgmma_source(tile, out=out), WGMMA_KERNEL, tile)


def assert_builds_without_spills(source: str, kernel: str, tile: WgmmaTile) -> None:
    """NVRTC builds `source` for sm_90a without spills or warnings, in the tile's registers and memory."""
    c = compile_source(source, WGMMA_ARCH, kernel)
    r = c.resources
    print(f"{tile}: {r.registers} registers, {r.spill_bytes} spill bytes, {tile.smem_bytes} B dynamic shared")
    assert r.spill_bytes == 0 and r.stack_bytes == 0
    assert "warning" not in c.log
    # The barriers, padded to the 1024-byte alignment of the dynamic stages that follow them.
    assert r.smem_static_bytes == 1024 and tile.smem_bytes + r.smem_static_bytes <= MAX_SMEM
    assert r.registers * tile.threads <= 65536 and tile.bn // 2 + 16 <= r.registers


def test_built_for_plain_sm_90_it_stops_with_a_message_naming_the_target():
    from autotune.gpu.compile import CompileError

    with pytest.raises(CompileError, match="compile for sm_90a"):
        compile_source(wgmma_source(SMALL[0]), "sm_90", WGMMA_KERNEL)
