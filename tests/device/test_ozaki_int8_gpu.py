"""The INT8 kernel of one Ozaki modulus on the device: (A B^T) mod m of int8 residues, exactly as
NumPy's int64 product, at awkward shapes, pitches and moduli, and past K_CHUNK of K."""

import numpy as np
import pytest

from autotune.gpu.compile import compile_source
from autotune.kernels.ozaki import K_CHUNK, residues
from autotune.kernels.ozaki_int8 import KERNEL, Int8Tile, source

pytestmark = pytest.mark.gpu

TILES = (Int8Tile(), Int8Tile(64, 64, 32, 2, 2), Int8Tile(128, 256, 64, 2, 4))


def _run(tile, a, b, m, pad=0):
    """Return the kernel's C for int8 A (M x K) and B (N x K), rows stored `pad` bytes apart more."""
    import cupy as cp

    mod = cp.cuda.function.Module()
    mod.load(compile_source(source(tile), "sm_90", KERNEL).cubin)
    fn = mod.get_function(KERNEL)
    (M, K), N = a.shape, b.shape[0]
    ga = cp.zeros((M, K + pad), cp.int8)
    gb = cp.zeros((N, K + pad), cp.int8)
    ga[:, :K], gb[:, :K] = cp.asarray(a), cp.asarray(b)
    c = cp.full((M, N), -7, cp.int32)
    args = (np.int32(M), np.int32(N), np.int32(K), ga, np.int32(K + pad), gb, np.int32(K + pad), c, np.int32(N))
    fn(tile.grid(M, N), (tile.threads, 1, 1), (*args, np.int32(m)))
    return cp.asnumpy(c)


def _want(a, b, m):
    full = a.astype(np.int64) @ b.astype(np.int64).T
    return np.mod(full, m) if m else full


@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t.bm}x{t.bn}x{t.bk}")
@pytest.mark.parametrize(
    ("shape", "pad"),
    [((1, 1, 1), 0), ((37, 45, 100), 3), ((128, 128, 64), 0), ((200, 130, 1000), 16), ((257, 129, 4096), 0)],
)
@pytest.mark.parametrize("m", [0, 256, 251])
def test_one_modulus_is_exact(tile, shape, pad, m):
    M, N, K = shape
    rng = np.random.default_rng(M * N + K)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    if m:  # residues as the scaling pass writes them
        a, b = residues(a.astype(np.float64), m), residues(b.astype(np.float64), m)
    assert np.array_equal(_run(tile, a, b, m, pad), _want(a, b, m))


def test_k_past_a_chunk_is_reduced_before_int32_overflows():
    """2 K_CHUNK + 96 products of (-128)(-128): 2^31 and more in one INT32 sum without the reduction."""
    M, N, K = 20, 12, 2 * K_CHUNK + 96
    a = np.full((M, K), -128, np.int8)
    b = np.full((N, K), -128, np.int8)
    b[3, ::5] = 127
    assert K * 128 * 128 > 2**31
    for tile in TILES[:2]:
        assert np.array_equal(_run(tile, a, b, 256), _want(a, b, 256))
        assert np.array_equal(_run(tile, a, b, 253), _want(a, b, 253))
