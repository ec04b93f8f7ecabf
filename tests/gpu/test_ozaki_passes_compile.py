"""The Ozaki scaling and reconstruction kernels (kernels/ozaki_passes.py) without a GPU: they render
and compile for sm_90 without spills at every number of moduli, and Garner's constants, as the
reconstruction kernel uses them, rebuild the same integers as ozaki.crt."""

import numpy as np
import pytest

from autotune.gpu.compile import compile_source
from autotune.kernels import ozaki
from autotune.kernels.ozaki_guard import GUARD_COUNTS, GUARD_KERNEL, guard_source
from autotune.kernels.ozaki_passes import (
    CRT_KERNEL,
    SCALE_KERNEL,
    crt_constants,
    crt_grid,
    crt_source,
    exp_chunk,
    exp_grid,
    float_residue,
    garner,
    res_grid,
    residue_pitch,
    scale_source,
)
from autotune.kernels.sass import analyze_cubin, find_cuobjdump


@pytest.mark.parametrize("n", [1, 8, pytest.param(20, marks=pytest.mark.slow)])  # 20 moduli: the longest compile
def test_the_passes_compile_for_sm90_without_spills(n):
    for src, kernel in (
        (scale_source(n), f"{SCALE_KERNEL}_sq"),
        (scale_source(n), f"{SCALE_KERNEL}_exp"),
        (scale_source(n), f"{SCALE_KERNEL}_resk"),
        (scale_source(n), f"{SCALE_KERNEL}_rest"),
        (scale_source(n, stats=True), f"{SCALE_KERNEL}_sq"),  # the check's pass, with the stats
        (scale_source(n, stats=True), f"{SCALE_KERNEL}_exp"),
        (crt_source(n), CRT_KERNEL),
    ):
        r = compile_source(src, "sm_90", kernel).resources
        print(f"{n} moduli, {kernel}: {r.registers} registers, {r.smem_static_bytes} B shared")
        assert r.spill_bytes == 0 and r.stack_bytes == 0 and r.registers <= 255


def test_only_the_check_s_pass_makes_the_stats_and_the_engines_fail_any_judge_that_reads_theirs():
    """An engine's pass writes NaN 1-norms: stats read from it could never pass the guarantee."""
    plain, stats = scale_source(8), scale_source(8, stats=True)
    assert "l1 += (double)a;" in stats and "l1 += (double)a;" not in plain
    assert "0x7ff8000000000000" in plain and "0x7ff8000000000000" not in stats


def test_the_check_compiles_for_sm90_without_spills():
    """gpu/ozaki_guard.py's kernels, as it builds them (no contracted multiply-adds)."""
    for counts in (GUARD_COUNTS, 1):
        for kernel in (GUARD_KERNEL, f"{GUARD_KERNEL}_pick", f"{GUARD_KERNEL}_judge"):
            r = compile_source(guard_source(counts), "sm_90", kernel, ("--fmad=false",)).resources
            assert r.spill_bytes == 0 and r.stack_bytes == 0 and r.registers <= 255, (kernel, r)


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
def test_the_reconstruction_reads_each_plane_as_bytes():
    """The INT8 GEMMs' uint8 planes: 4 columns' bytes a modulus in one 32-bit load, or one byte."""
    n = 7
    assert "const unsigned char* __restrict__ P" in crt_source(n)
    ops = analyze_cubin(compile_source(crt_source(n), "sm_90", CRT_KERNEL).cubin, CRT_KERNEL).total
    loads = {op: k for op, k in ops.items() if op.startswith("LDG")}
    # The read-only loads are the planes' and the exponents' (e_i, and f_j: 4 then 1); C's are not.
    assert loads.get("LDG.E.U8.CONSTANT") == n and loads.get("LDG.E.CONSTANT") == n + 6, loads
    assert not any(op.startswith("LDG.E.64") or op.startswith("LDG.E.128.CONSTANT") for op in loads), loads


def test_the_sources_carry_each_modulus_as_a_constant():
    scale, crt = scale_source(8), crt_source(8)
    for m in ozaki.moduli(8):
        assert f"at_sres(x[0], {m})" in scale and f"at_sres32(xi[0], {m})" in scale and f"% {m}u;" in crt
    assert "at_sres(x[0], 229)" not in scale_source(8) and "at_sres(x[0], 229)" in scale_source(9)
    assert f"#define AT_NORM_BITS {ozaki.norm_bits(8)}" in scale


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 16, 20])
def test_garner_rebuilds_the_crt_integers(n):
    rng = np.random.default_rng(n)
    p = 1
    for m in ozaki.moduli(n):
        p *= m
    xs = [0, 1, p // 2, p // 2 + 1, p - 1] + [int(v) for v in rng.integers(0, 2**62, 40)]
    xs = [x % p for x in xs]
    parts = [np.array([x % m for x in xs], np.int64) for m in ozaki.moduli(n)]
    want = ozaki.crt(parts, n)  # symmetric: x - P above P / 2
    for i, x in enumerate(xs):
        got = garner([int(q[i]) for q in parts], n)
        assert got == x
        assert (got - p if got > p // 2 else got) == want[i]


def test_the_limbs_hold_p_and_its_half():
    for n in (1, 8, 9, 20):
        c = crt_constants(n)
        p = 1
        for m in ozaki.moduli(n):
            p *= m
        assert p < 2 ** (32 * c.limbs) and sum(x << (32 * q) for q, x in enumerate(c.whole)) == p
        assert sum(x << (32 * q) for q, x in enumerate(c.half)) == p // 2
    assert crt_constants(8).limbs == 2 and crt_constants(20).limbs == 5


def test_residue_rows_are_padded_to_16_bytes():
    assert [residue_pitch(k) for k in (0, 1, 16, 17, 100)] == [0, 16, 16, 32, 112]
    # Strided vectors: tiles of 128 of the padded K by 32 vectors.
    assert res_grid(33, 100, False) == (1, 2, 1) and res_grid(33, 129, False) == (2, 2, 1)
    # Contiguous: 256 of K by 4 vectors a block; past 65535 blocks down, the kernel loops over vectors.
    assert res_grid(33, 100, True) == (1, 9, 1) and res_grid(33, 257, True) == (2, 9, 1)
    assert res_grid(10**6, 16, True) == (1, 65535, 1) and crt_grid(10**6, 257) == (2, 65535, 1)


def test_k_is_cut_into_chunks_only_where_vectors_are_too_few_for_the_gpu():
    # 16384 rows make 2048 blocks (8 a block), eight an SM of 132 SMs and more: one chunk.
    assert exp_chunk(16384, 8192, True, 132) == 8192
    # 8192 rows make 1024: K in 2 chunks. 8192 columns make 256 blocks (32 a block): K in 5 chunks,
    # 1280 blocks, each a multiple of 256 deep.
    assert exp_chunk(8192, 8192, True, 132) == 4096
    assert exp_chunk(8192, 8192, False, 132) == 1792 and exp_grid(8192, 8192, False, 1792) == (256, 5, 1)
    # 64 columns of K 2^20: 2 blocks of vectors, so K in 512 chunks of 2048 (8 blocks an SM).
    assert exp_chunk(64, 1 << 20, False, 132) == 2048 and exp_grid(64, 1 << 20, False, 2048) == (2, 512, 1)
    # Shallow K is never cut below 256, and K = 0 still has its one chunk (whose sums are 0).
    assert exp_chunk(10, 300, True, 132) == 512 and exp_grid(10, 300, True, 512) == (2, 1, 1)
    assert exp_chunk(10, 600, True, 132) == 512 and exp_grid(10, 600, True, 512) == (2, 2, 1)
    assert exp_grid(10, 0, True, exp_chunk(10, 0, True, 132)) == (2, 1, 1)


@pytest.mark.parametrize("n", [7, 8])
def test_the_float_residues_are_the_symmetric_residues(n):
    """at_fres (7 moduli or fewer) against ozaki.residues where |x| <= 2^H: random, multiples of m
    and halves of m, where a rounded quotient can be one off, and the extremes."""
    from autotune.kernels.ozaki_passes import scale_source

    h = ozaki.norm_bits(n)
    assert ("void at_res4f(" in scale_source(n)) == (n <= 7)
    if n > 7:
        return
    rng = np.random.default_rng(n)
    for m in ozaki.moduli(n):
        q = rng.integers(-(2**h) // m, 2**h // m, 300)
        xs = np.concatenate([rng.integers(-(2**h), 2**h + 1, 500), q * m, q * m + m // 2, q * m - m // 2 - 1])
        xs = np.concatenate([xs, q * m + m // 2 + 1, [0, 1, -1, 2**h, -(2**h), m // 2, -(m // 2), m, -m]])
        xs = xs[np.abs(xs) <= 2**h]
        got = np.array([float_residue(int(x), m) for x in xs])
        assert np.array_equal(got, ozaki.residues(xs.astype(np.int64), m)), m
