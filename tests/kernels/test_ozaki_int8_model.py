"""The pipelined INT8 kernel (templates/_ozaki_int8_fast.cu.j2) replayed in NumPy, lane by lane.

Without a GPU this is its correctness check: the kernel's index arithmetic (its copies into
swizzled shared memory, the stages of its cp.async pipeline, the rows each lane hands ldmatrix,
the mma tiles, the reduction every K_CHUNK and the epilogue's stores) is replayed here against
ldmatrix and mma.sync m16n8k32 as the PTX ISA defines their fragments, and every C element must
equal NumPy's int64 product. The kernel's lines that the replay copies are checked to be in the
template word for word, so the two cannot drift apart silently.
"""

import numpy as np
import pytest

from autotune.kernels.ozaki import K_CHUNK, residues
from autotune.kernels.ozaki_int8 import FastTile, fast_source

LANES = np.arange(32)


def swz(q):
    """Return AT_SWZ(q): chunk q of a tile's place, its index in each 128-byte line XORed with the line's."""
    return (q & ~7) | ((q ^ (q >> 3)) & 7)


# --- the PTX ISA's definitions, independent of the kernel ---------------------------------------


def ldmatrix_x4(smem, addr):
    """Registers (32 lanes x 4 x 4 bytes) of ldmatrix.m8n8.x4.b16 with lane l's row address addr[l].

    Matrix i's row r is the 16 bytes at addr[8 i + r]; lane l's register i holds the b16 pair at
    columns 2 (l % 4), 2 (l % 4) + 1 of row l / 4: bytes 4 (l % 4) to 4 (l % 4) + 3.
    """
    assert all(a % 16 == 0 for a in addr), "ldmatrix rows are 16-byte aligned"
    out = np.empty((32, 4, 4), np.int8)
    for lane in range(32):
        for i in range(4):
            a = addr[8 * i + lane // 4] + 4 * (lane % 4)
            out[lane, i] = smem[a : a + 4]
    return out


def bank_groups_distinct(addr):
    """Whether each 8-lane phase of an ldmatrix reads 8 different 16-byte bank groups."""
    return all(len({(a // 16) % 8 for a in addr[8 * i : 8 * i + 8]}) == 8 for i in range(4))


def mma_m16n8k32(d, a, b0, b1):
    """D += A B for mma.sync.m16n8k32.row.col.s32.s8.s8.s32, each operand in its fragment layout.

    A's register i, byte e of lane l (g = l / 4, t = l % 4): row g + 8 (i % 2), k 4 t + e + 16 (i / 2).
    B's register i, byte e: k 4 t + e + 16 i, column g. D's register r: row g + 8 (r / 2), col 2 t + r % 2.
    """
    am, bm = np.zeros((16, 32), np.int64), np.zeros((32, 8), np.int64)
    for lane in range(32):
        g, t = divmod(lane, 4)
        for i in range(4):
            am[g + 8 * (i % 2), 4 * t + 16 * (i // 2) : 4 * t + 16 * (i // 2) + 4] = a[lane, i]
        bm[4 * t : 4 * t + 4, g] = b0[lane]
        bm[16 + 4 * t : 16 + 4 * t + 4, g] = b1[lane]
    prod = am @ bm
    for lane in range(32):
        g, t = divmod(lane, 4)
        for r in range(4):
            d[lane, r] += prod[g + 8 * (r // 2), 2 * t + r % 2]


# --- the kernel, line by line -------------------------------------------------------------------

# The template's lines the replay below copies (whitespace aside).
KERNEL_LINES = (
    "#define AT_SWZ(q) (((q) & ~7) | (((q) ^ ((q) >> 3)) & 7))",
    "const int c = threadIdx.x % AT_CH, r_first = threadIdx.x / AT_CH, gk = k0 + 16 * c;",
    "const int r = r_first + i * ({{ THREADS }} / AT_CH), gr = r0 + r;",
    "const signed char* src = src0 + (size_t)i * ({{ THREADS }} / AT_CH) * ld;",
    "signed char* dst = s + 16 * AT_SWZ(p);",
    "const int bytes = gr < rows ? (left < 0 ? 0 : left < 16 ? left : 16) : 0;",
    "const int wm = (warp / {{ WARPS_N }}) * {{ WM }}, wn = (warp % {{ WARPS_N }}) * {{ WN }};",
    "const int a_row = wm + lane % 16, a_half = lane / 16;",
    "const int b_row = wn + lane % 8 + 8 * (lane / 16), b_half = (lane / 8) % 2;",
    'asm volatile("cp.async.wait_group {{ STAGES - 2 }};\\n" ::);',
    "const int nk = kt + {{ STAGES }} - 1;",
    "signed char* s = at_smem + (nk % {{ STAGES }}) * AT_STAGE_BYTES;",
    "if (m > 0 && kt > 0 && kt % (AT_K_CHUNK / {{ BK }}) == 0) {",
    "const unsigned stage = base + (kt % {{ STAGES }}) * AT_STAGE_BYTES;",
    "at_ldmatrix_x4(a[i], stage + 16 * AT_SWZ((a_row + 16 * i) * AT_CH + 2 * ks + a_half));",
    "at_ldmatrix_x4(r, stage + {{ BM }} * {{ BK }} + 16 * AT_SWZ((b_row + 8 * j) * AT_CH + 2 * ks + b_half));",
    "b[j][0] = r[0];",
    "b[j + 1][1] = r[3];",
    "for (int j = 0; j < {{ NI }}; ++j) at_mma_s8(acc[i][j], a[i], b[j][0], b[j][1]);",
    "const int row = bm + wm + i * 16 + g + 8 * h;",
    "const int col = bn + wn + j * 8 + 2 * t;",
    "int v[2] = {acc[i][j][2 * h], acc[i][j][2 * h + 1]};",
)


def _template_text():
    from autotune.kernels.family import TEMPLATE_DIR
    from autotune.kernels.ozaki_int8 import FAST_TEMPLATE

    return (TEMPLATE_DIR / FAST_TEMPLATE).read_text()


def test_the_replay_copies_the_templates_lines():
    text = " ".join(_template_text().split())
    missing = [line for line in KERNEL_LINES if " ".join(line.split()) not in text]
    assert not missing, missing


class Block:
    """One block's shared memory and the stages' tiles, with the pipeline's hazards checked."""

    def __init__(self, tile, a, b, bm, bn, early=False):
        self.tile, self.a, self.b, self.bm, self.bn, self.early = tile, a, b, bm, bn, early
        self.stage_bytes = (tile.bm + tile.bn) * tile.bk
        self.smem = np.full(tile.stages * self.stage_bytes, 99, np.int8)  # garbage, never read
        self.groups = []  # committed groups: (stage, tile index, writes) each
        self.pending = []  # this group's writes, not yet committed
        self.holds = {}  # stage -> the tile it holds once its group retires
        self.retired = 0

    def _load(self, s, x, rows, r0, k0, base):
        """at_load_tile: every thread's chunks; the writes land when the group retires."""
        t, ch = self.tile, self.tile.bk // 16
        pieces = rows * ch
        assert pieces % t.threads == 0
        written = set()
        for tid in range(t.threads):
            for i in range(pieces // t.threads):
                p = tid + i * t.threads
                c, r_first = tid % ch, tid // ch
                gk = k0 + 16 * c
                r = r_first + i * (t.threads // ch)
                gr = r0 + r
                assert (r, c) == divmod(p, ch)  # as the template's comment says
                dst = s * self.stage_bytes + base + 16 * swz(p)
                left = x.shape[1] - gk
                nbytes = (0 if left < 0 else min(left, 16)) if gr < x.shape[0] else 0
                chunk = np.zeros(16, np.int8)
                if nbytes:  # none read: the row is past the matrix or the chunk past K
                    chunk[:nbytes] = x[gr, gk : gk + nbytes]
                self.pending.append((dst, chunk))
                if self.early:  # a copy may land as soon as it is issued
                    self.smem[dst : dst + 16] = chunk
                written.add(dst)
        assert len(written) == pieces  # the swizzle is a permutation of the tile's chunks

    def issue(self, tile_index):
        """Both loads of tile `tile_index` into its stage (a stage nobody reads until it retires)."""
        t = self.tile
        s = tile_index % t.stages
        self._load(s, self.a, t.bm, self.bm, tile_index * t.bk, 0)
        self._load(s, self.b, t.bn, self.bn, tile_index * t.bk, t.bm * t.bk)
        self.holds[s] = None  # in flight: reading it now would be a race
        self._tile = (s, tile_index)

    def commit(self, loaded):
        self.groups.append((*self._tile, self.pending) if loaded else None)
        self.pending = []

    def wait(self, allowed):
        """cp.async.wait_group `allowed`: all but the newest `allowed` groups land."""
        while self.retired < len(self.groups) - allowed:
            g = self.groups[self.retired]
            if g is not None:
                s, index, writes = g
                for dst, chunk in writes:
                    self.smem[dst : dst + 16] = chunk
                self.holds[s] = index
            self.retired += 1


def _compute(tile, blk, acc, stage):
    """One stage's k-steps, warp by warp: ldmatrix from the swizzled tiles, then the mma tiles."""
    t, ch = tile, tile.bk // 16
    wm_, wn_ = t.bm // t.warps_m, t.bn // t.warps_n
    mi, ni = wm_ // 16, wn_ // 8
    for warp in range(t.warps_m * t.warps_n):
        wm, wn = (warp // t.warps_n) * wm_, (warp % t.warps_n) * wn_
        a_row, a_half = wm + LANES % 16, LANES // 16
        b_row, b_half = wn + LANES % 8 + 8 * (LANES // 16), (LANES // 8) % 2
        for ks in range(t.bk // 32):
            frag_a = []
            for i in range(mi):
                addr = stage + 16 * swz((a_row + 16 * i) * ch + 2 * ks + a_half)
                assert bank_groups_distinct(addr)
                frag_a.append(ldmatrix_x4(blk.smem, addr))
            frag_b = [None] * ni
            for j in range(0, ni, 2):
                addr = stage + t.bm * t.bk + 16 * swz((b_row + 8 * j) * ch + 2 * ks + b_half)
                assert bank_groups_distinct(addr)
                r = ldmatrix_x4(blk.smem, addr)
                frag_b[j], frag_b[j + 1] = (r[:, 0], r[:, 1]), (r[:, 2], r[:, 3])
            for i in range(mi):
                for j in range(ni):
                    mma_m16n8k32(acc[warp, i, j], frag_a[i], *frag_b[j])


def _store(tile, acc, m, bm, bn, c, writes):
    """The epilogue: each lane's accumulators reduced into [0, m) and written inside C."""
    t, (M, N) = tile, c.shape
    wm_, wn_ = t.bm // t.warps_m, t.bn // t.warps_n
    for warp, lane, i, h, j, e in np.ndindex(t.warps_m * t.warps_n, 32, wm_ // 16, 2, wn_ // 8, 2):
        wm, wn = (warp // t.warps_n) * wm_, (warp % t.warps_n) * wn_
        g, tt = divmod(lane, 4)
        row, col = bm + wm + i * 16 + g + 8 * h, bn + wn + j * 8 + 2 * tt
        v = int(acc[warp, i, j, lane, 2 * h + e])
        if m > 0:
            v = int(np.fmod(v, m))
            v += m if v < 0 else 0
        if row < M and col + e < N:
            c[row, col + e] = v
            writes[row, col + e] += 1


def replay(tile, a, b, m, k_chunk=K_CHUNK, early=False):
    """Return the kernel's C for int8 A (M x K) and B (N x K) modulo m, one block at a time.

    Args:
        k_chunk: the depth between reductions (the kernel's K_CHUNK unless a test shrinks it).
        early: the copies land as soon as issued, else as late as wait_group allows.
    """
    (M, K), N = a.shape, b.shape[0]
    t, stages = tile, tile.stages
    mi, ni = t.bm // t.warps_m // 16, t.bn // t.warps_n // 8
    c = np.full((M, N), -7, np.int64)
    writes = np.zeros((M, N), np.int64)
    gx, gy, _ = t.grid(M, N)
    kt_all = -(-K // t.bk)
    for by, bx in np.ndindex(gy, gx):
        bm, bn = by * t.bm, bx * t.bn
        blk = Block(t, a, b, bm, bn, early)
        for s in range(stages - 1):
            if s < kt_all:
                blk.issue(s)
            blk.commit(s < kt_all)
        acc = np.zeros((t.warps_m * t.warps_n, mi, ni, 32, 4), np.int64)
        for kt in range(kt_all):
            blk.wait(stages - 2)
            # __syncthreads: every warp is done with tile kt - 1
            nk = kt + stages - 1
            if nk < kt_all:
                blk.issue(nk)
            blk.commit(nk < kt_all)
            if m > 0 and kt > 0 and kt % (k_chunk // t.bk) == 0:
                acc = np.fmod(acc, m)  # C's % truncates toward zero, as fmod does
            assert blk.holds.get(kt % stages) == kt, f"tile {kt} read before it landed"
            _compute(t, blk, acc, (kt % stages) * blk.stage_bytes)
            # INT32's bound, scaled to k_chunk: under m before a chunk, then at most k_chunk
            # products of 128^2 (K_CHUNK's: 2^30 + m < 2^31).
            assert np.abs(acc).max(initial=0) < max(m, 1) + k_chunk * 128 * 128 <= 2**31
        blk.wait(0)
        _store(t, acc, m, bm, bn, c, writes)
    assert (writes == 1).all(), "every element of C written once"
    return c


def int8_product(a, b, m):
    """A B^T in int64, mod m unless m is 0: what the INT8 kernels write."""
    full = a.astype(np.int64) @ b.astype(np.int64).T
    return np.mod(full, m) if m else full


def int8s(rng, *shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def int8_case(shape: tuple[int, int, int], m: int):
    """Seeded int8 operands A (M x K) and B (N x K), residues mod m unless m is 0, and (A B^T) mod m."""
    M, N, K = shape
    rng = np.random.default_rng(M * N + K + m)
    a, b = int8s(rng, M, K), int8s(rng, N, K)
    if m:
        a, b = residues(a.astype(np.float64), m), residues(b.astype(np.float64), m)
    return a, b, int8_product(a, b, m)


def tails_case():
    """Residues mod 253 at M, N, K = 130, 260, 272: off the multiples of the driver's tiles."""
    rng = np.random.default_rng(5)
    a, b = (residues(rng.integers(-300, 300, (rows, 272)).astype(np.float64), 253) for rows in (130, 260))
    return a, b, int8_product(a, b, 253)


def worst_case(n, k):
    """A (20 x k) and B (n x k) of -128, but 127 at every fifth k of B's row 3: the largest sums."""
    a, b = np.full((20, k), -128, np.int8), np.full((n, k), -128, np.int8)
    b[3, ::5] = 127
    return a, b


def tile_id(t):
    return f"{t.bm}x{t.bn}x{t.bk}s{t.stages}"


SMALL = (FastTile(64, 64, 32, 2, 2, 3), FastTile(32, 64, 64, 1, 2, 2), FastTile(64, 32, 128, 2, 1, 4))


@pytest.mark.parametrize("tile", SMALL, ids=tile_id)
@pytest.mark.parametrize("shape", [(1, 1, 1), (70, 45, 100), (64, 64, 32), (33, 97, 300)])
@pytest.mark.parametrize("m", [0, 256, 251])
def test_the_replayed_kernel_is_exact(tile, shape, m):
    a, b, want = int8_case(shape, m)
    # The copies landing as late as wait_group allows, and as early as issued.
    assert np.array_equal(replay(tile, a, b, m), want)
    assert np.array_equal(replay(tile, a, b, m, early=True), want)


def test_the_default_tile_replayed_with_tails():
    """The tile the driver runs (128 x 256 x 128, 8 warps, 3 stages) at M, N, K off its multiples."""
    a, b, want = tails_case()
    assert np.array_equal(replay(FastTile(), a, b, 253), want)


def test_the_chunk_reduction_keeps_the_sum_exact():
    """With a K_CHUNK of 64 the reduction runs every other stage; worst-case residues stay exact."""
    a, b = worst_case(24, 5 * 64 + 17)
    for m in (256, 253):
        assert np.array_equal(replay(SMALL[0], a, b, m, k_chunk=64), int8_product(a, b, m))


def test_a_mistake_in_the_mapping_is_caught(monkeypatch):
    """The replay can fail: a B fragment's halves swapped gives wrong products."""
    rng = np.random.default_rng(1)
    a, b = int8s(rng, 16, 64), int8s(rng, 8, 64)
    real = mma_m16n8k32
    monkeypatch.setitem(globals(), "mma_m16n8k32", lambda d, fa, b0, b1: real(d, fa, b1, b0))
    assert not np.array_equal(replay(SMALL[0], a, b, 0), int8_product(a, b, 0))
    monkeypatch.undo()
    assert np.array_equal(replay(SMALL[0], a, b, 0), int8_product(a, b, 0))


def test_a_bad_swizzle_would_conflict():
    """Without the XOR, 8 rows of 64 bytes at one k put two rows on each bank group."""
    rows = np.arange(8)
    assert bank_groups_distinct(np.tile(16 * swz(rows * 4 + 1), 4))
    assert not bank_groups_distinct(np.tile(16 * (rows * 4 + 1), 4))


def test_the_fast_source_renders_each_tile():
    for tile in SMALL + (FastTile(),):
        src = fast_source(tile)
        assert f"BM = {tile.bm}, BN = {tile.bn}, BK = {tile.bk}" in src and "{{" not in src
