"""The INT8 kernels of the Ozaki moduli on the device, the reference (one modulus a launch), the
pipelined one and the wgmma ones (sm_90a, fed by cp.async or by tensor maps; all three every modulus
in one launch): (A B^T) mod m of int8 residues, exactly as NumPy's int64 product, at awkward shapes,
pitches and moduli, and past K_CHUNK of K; in uint8 planes, and in int32 ones, whose raw sums (m = 0)
check the GEMM itself. No element is left unwritten, and nothing around the planes is written."""

from functools import cache

import numpy as np
import pytest

from autotune.kernels.ozaki import K_CHUNK, residues
from autotune.kernels.ozaki_int8 import FAST_KERNEL, KERNEL, FastTile, Int8Tile, fast_source, source
from autotune.kernels.ozaki_wgmma import WGMMA_ARCH, WGMMA_KERNEL, WgmmaTile, wgmma_source
from autotune.kernels.ozaki_wgmma_tma import TMA_KERNEL, WgmmaTmaTile, tma_source

pytestmark = pytest.mark.gpu

TILES = (
    Int8Tile(),
    Int8Tile(64, 64, 32, 2, 2),
    Int8Tile(128, 256, 64, 2, 4),
    FastTile(),
    FastTile(128, 128, 64, 2, 2, 4),
    FastTile(64, 64, 32, 2, 2, 3),
    WgmmaTile(),
    WgmmaTile(64, 48, 128, 3),
    WgmmaTile(128, 128, 256, 3),
    WgmmaTmaTile(),
    WgmmaTmaTile(64, 48, 128, 3),
    WgmmaTmaTile(128, 128, 256, 3),
)


def _tile_id(t):
    return f"{type(t).__name__}-{t.bm}x{t.bn}x{t.bk}" + (f"s{t.stages}" if hasattr(t, "stages") else "")


@cache
def _function(tile, out):
    """Return the tile's kernel for planes of `out` (one of OUTPUTS), loaded."""
    from autotune.gpu.ozaki import int8_function

    fast = isinstance(tile, (FastTile, WgmmaTile))
    if isinstance(tile, WgmmaTmaTile):
        src, name, arch = tma_source(tile, out=out), TMA_KERNEL, WGMMA_ARCH
    elif isinstance(tile, WgmmaTile):
        src, name, arch = wgmma_source(tile, out=out), WGMMA_KERNEL, WGMMA_ARCH
    elif fast:
        src, name, arch = fast_source(tile, out=out), FAST_KERNEL, "sm_90"
    else:
        src, name, arch = source(tile, out=out), KERNEL, "sm_90"
    return int8_function(src, name, arch, tile.smem_bytes if fast else 0)


def _out(ms):
    """Return the planes' type for moduli `ms`: uint8 unless a plane asks for its raw sums (m = 0)."""
    return "uint8" if all(ms) else "int32"


def _run(tile, a, b, ms, pad=0, out=None, fill=None, offset=0):
    """Return the kernel's C planes for int8 planes A (q x M x K), B (q x N x K), modulo ms[q].

    Rows are stored `pad` bytes apart more than K (for the TMA-fed kernel, then up to a multiple of
    16, what its maps need); the reference kernel runs once a plane. C's planes are of `out`
    (`_out(ms)` when None), `offset` elements into a buffer of `fill` (-7, or 255 for uint8) that
    runs on 64 elements past them, which must stay as they were.
    """
    import cupy as cp

    from autotune.gpu.ozaki import tma_products

    out = out or _out(ms)
    fn = _function(tile, out)
    (Q, M, K), N = a.shape, b.shape[1]
    tma = isinstance(tile, WgmmaTmaTile)
    pad += -(K + pad) % 16 if tma else 0
    # (Past K the TMA-fed kernel's rows hold bytes its maps must not read: they end at K.)
    ga = cp.full((Q, M, K + pad), 77 if tma else 0, cp.int8)
    gb = cp.full((Q, N, K + pad), -77 if tma else 0, cp.int8)
    ga[:, :, :K], gb[:, :, :K] = cp.asarray(a), cp.asarray(b)
    dtype = cp.uint8 if out == "uint8" else cp.int32
    fill = (255 if out == "uint8" else -7) if fill is None else fill
    buf = cp.full(offset + Q * M * N + 64, fill, dtype)
    c = buf[offset : offset + Q * M * N].reshape(Q, M, N)
    ld = np.int32(K + pad)
    if tma:
        tma_products(fn, tile, ga, gb, K, c, cp.asarray(ms, cp.int32))
    elif isinstance(tile, (FastTile, WgmmaTile)):
        args = (np.int32(M), np.int32(N), np.int32(K), ga, ld, np.int64(ga.strides[0]), gb, ld, np.int64(gb.strides[0]))
        args += (c, np.int32(N), np.int64(M * N), cp.asarray(ms, cp.int32))
        fn(tile.grid(M, N, Q), (tile.threads, 1, 1), args, shared_mem=tile.smem_bytes)
    else:
        for q, m in enumerate(ms):
            args = (np.int32(M), np.int32(N), np.int32(K), ga[q], ld, gb[q], ld, c[q], np.int32(N), np.int32(m))
            fn(tile.grid(M, N), (tile.threads, 1, 1), args)
    around = cp.asnumpy(cp.concatenate((buf[:offset], buf[offset + Q * M * N :])))
    assert (around == np.array(fill, dtype)).all(), "a write outside C's planes"
    return cp.asnumpy(c)


def _exact(tile, a, b, ms, **kw):
    """Return whether the kernel's planes equal NumPy's, of their type, every element written.

    uint8 planes are run twice, on fills 0 and 255: any byte may be a residue modulo 256, so an
    element left as it was could pass for one with a single fill.
    """
    want = _want(a, b, ms)
    out = kw.pop("out", None) or _out(ms)
    fills = (0, 255) if out == "uint8" else (-7,)
    got = [_run(tile, a, b, ms, out=out, fill=f, **kw) for f in fills]
    return all(g.dtype == np.dtype(out) and np.array_equal(g, want) for g in got)


def _want(a, b, ms):
    full = np.einsum("qmk,qnk->qmn", a.astype(np.int64), b.astype(np.int64))
    return np.stack([np.mod(f, m) if m else f for f, m in zip(full, ms, strict=True)])


def _operands(shape, ms, seed):
    """Return planes of int8 A and B, each plane modulo its m's residues (raw int8 for m = 0)."""
    M, N, K = shape
    rng = np.random.default_rng(seed)
    a = rng.integers(-300, 300, (len(ms), M, K)).astype(np.float64)
    b = rng.integers(-300, 300, (len(ms), N, K)).astype(np.float64)
    pa = [residues(x, m) if m else np.clip(x, -128, 127).astype(np.int8) for x, m in zip(a, ms, strict=True)]
    pb = [residues(x, m) if m else np.clip(x, -128, 127).astype(np.int8) for x, m in zip(b, ms, strict=True)]
    return np.stack(pa), np.stack(pb)


@pytest.mark.parametrize("tile", TILES, ids=_tile_id)
@pytest.mark.parametrize(
    ("shape", "pad"),
    # pad 3: pitches off 16 bytes (byte loads); 12: aligned pitches with K's last chunk partial.
    [((1, 1, 1), 0), ((37, 45, 100), 3), ((37, 45, 100), 12), ((128, 128, 64), 0), ((200, 130, 1000), 16)]
    + [((257, 129, 4096), 0), ((130, 260, 272), 0), ((300, 520, 1040), 0)],
)
@pytest.mark.parametrize("m", [0, 256, 251])
def test_one_modulus_is_exact(tile, shape, pad, m):
    """uint8 planes for m > 0, int32 ones for the raw sums (m = 0)."""
    a, b = _operands(shape, [m], shape[0] * shape[1] + shape[2])
    assert _exact(tile, a, b, [m], pad=pad)


@pytest.mark.parametrize("tile", TILES, ids=_tile_id)
@pytest.mark.parametrize("out", ["uint8", "int32"])
def test_every_modulus_in_its_plane(tile, out):
    """Eight planes, each its own residues and modulus: no plane reads or writes another's."""
    ms = [256, 255, 253, 251, 247, 241, 239, 233]
    a, b = _operands((70, 300, 130), ms, 9)
    assert _exact(tile, a, b, ms, out=out)


@pytest.mark.parametrize("tile", TILES, ids=_tile_id)
@pytest.mark.parametrize("out", ["uint8", "int32"])
@pytest.mark.parametrize("shape", [(37, 46, 100), (37, 45, 100), (1, 2, 32)])
def test_planes_off_a_pairs_alignment_are_stored_one_element_at_a_time(tile, out, shape):
    """C one element past an aligned address (even N: pitch and plane even, the pointer alone
    stops the pairs' stores; odd N: the pitch too), two planes."""
    ms = [251, 256]
    a, b = _operands(shape, ms, 5)
    assert _exact(tile, a, b, ms, out=out, offset=1)


def test_k_past_a_chunk_is_reduced_before_int32_overflows():
    """2 K_CHUNK + 96 products of (-128)(-128): 2^31 and more in one INT32 sum without the reduction."""
    M, N, K = 20, 12, 2 * K_CHUNK + 96
    a = np.full((1, M, K), -128, np.int8)
    b = np.full((1, N, K), -128, np.int8)
    b[0, 3, ::5] = 127
    assert K * 128 * 128 > 2**31
    for tile in (TILES[0], TILES[1], TILES[3], TILES[5], TILES[6], TILES[7], TILES[9], TILES[10]):
        for m in (256, 253):
            assert _exact(tile, a, b, [m]), (tile, m)
