"""On the GPU: every family in every layout it reads, with pitched and unaligned operands, through
the search's evaluator, autotune.load and autotune.matmul; and the exported header's example
program against cuBLAS."""

import cupy as cp
import pytest
from helpers import AWKWARD_SHAPES, ROOT, have_nvcc, run_example_program
from test_correctness import A_ROWS_CONFIGS, B_ROWS_CONFIGS, CONFIGS

import autotune
from autotune.core.types import Config, Problem, Status
from autotune.dispatch.table import built_for
from autotune.kernels.family import Family
from autotune.kernels.space import Space
from autotune.records.export import export
from autotune.records.store import update_record

pytestmark = pytest.mark.gpu

LAYOUTS = ["nt", "tn", "tt"]
# The awkward shapes but four whose cases the others already cover (each runs in three layouts).
SHAPES = [s for s in AWKWARD_SHAPES if s not in {(31, 17, 3), (1000, 1000, 1000), (64, 64, 8192), (257, 1025, 33)}]


def _reads(config, layout):
    return not Family.load(config.family).gaps(Problem(1, 1, 1, layout))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_family_correct_in_each_layout(gpu_evaluator, layout, shape):
    problem = Problem(*shape, layout)
    configs = list(dict.fromkeys(built_for(c, layout) for c in CONFIGS if _reads(c, layout)))
    ms = gpu_evaluator.evaluate(configs, problem, verify_only=True)
    ran = [m for m in ms if m.status is not Status.REJECTED]
    assert {m.config.family for m in ran} == {c.family for c in configs}
    bad = [f"{m.config.name}: {m.status.value} {m.message}" for m in ran if m.status is not Status.OK]
    assert not bad, "\n".join(bad)


def _kernels():
    """Each family's fallback and first seed, in each layout it reads."""
    out = []
    for fam in sorted(p.stem for p in (ROOT / "configs").glob("*.yaml")):
        sp = Space.load(fam)
        for cfg in dict.fromkeys(c for c in (sp.fallback, *sp.seeds[:1]) if c is not None):
            out += [(cfg, lay) for lay in ["nn", *LAYOUTS] if _reads(cfg, lay)]
        # fewcols' other kernel (a lane to a row), in both layouts it reads.
        rows = [c for c in sp.seeds if dict(c.params).get("LANE_ROWS")][:1]
        out += [(c, lay) for c in rows for lay in ["nn", *LAYOUTS] if _reads(c, lay)]
    return out


def _operand(rows, cols, stored_t, pad, offset, rng):
    """A logical rows x cols operand stored row-major (or, with stored_t, its transpose), inside a
    larger array: rows `pad` floats longer than needed, the first element `offset` floats in. NaN
    around it: a kernel that lets what lies outside the matrix into C shows it (NaN times the
    zeros a kernel pads its tiles with is NaN)."""
    srows, scols = (cols, rows) if stored_t else (rows, cols)
    big = cp.full((srows, scols + pad + offset), cp.nan, dtype=cp.float32)
    view = big[:, offset : offset + scols]
    view[...] = rng.random(view.shape, dtype=cp.float32) * 2 - 1
    return view.T if stored_t else view


@pytest.mark.parametrize("config, layout", _kernels(), ids=lambda x: getattr(x, "name", x))
@pytest.mark.parametrize("pad, offset", [(0, 0), (3, 1), (8, 4), (3, 0)])
def test_pitched_and_unaligned_operands_read_in_place(config, layout, pad, offset):
    """Row pitches that are and are not multiples of 4, pointers 4 bytes off 16-byte alignment:
    each kernel takes the 16-byte path only where both allow it, and is right either way. With
    pad 3 and no offset the pitches of the K = 33 and 77 operands are multiples of 4, so a
    16-byte chunk straddles K where the row's padding (NaN) begins."""
    kernel = autotune.load(config=config)
    rng = cp.random.default_rng(3)
    for M, N, K in [(67, 45, 33), (5, 130, 260), (130, 3, 77)]:
        a = _operand(M, K, layout[0] == "t", pad, offset, rng)
        b = _operand(K, N, layout[1] == "t", pad, offset, rng)
        big_c = rng.random((M, N + pad + offset), dtype=cp.float32)
        c = big_c[:, offset : offset + N]
        c0, big0 = c.copy(), big_c.copy()
        kernel(a, b, out=c, alpha=1.5, beta=-0.5)
        ref = 1.5 * (a.astype(cp.float64) @ b.astype(cp.float64)) - 0.5 * c0
        err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
        assert err < 1e-5, (M, N, K, err)
        outside = cp.ones(big_c.shape, dtype=bool)
        outside[:, offset : offset + N] = False
        assert bool((big_c[outside] == big0[outside]).all()), "wrote outside C"


@pytest.mark.parametrize("config", A_ROWS_CONFIGS + B_ROWS_CONFIGS, ids=lambda c: c.name)
def test_a_kept_as_stored_reads_nothing_past_k(config):
    """warptile's A_ROWS (B_ROWS) copies A's (B's) rows four k at a time: where the pitch allows
    16-byte copies but K % 4 != 0, the group that straddles K must take only what is inside it
    (NaN is stored past K here, so any of it read would show), and pitches or pointers that do not
    allow them take 4-byte copies; A stored M x K with B in either layout, NaN past K in B too."""
    kernel = autotune.load(config=config)
    rng = cp.random.default_rng(5)
    for (M, N, K), pad, offset in [
        ((67, 45, 33), 3, 0),  # pitch 36: 16-byte copies, the last group straddles K
        ((130, 16, 77), 3, 0),  # pitch 80
        ((5, 130, 260), 0, 0),
        ((67, 45, 33), 1, 1),  # pitch 35, 4 bytes off: 4-byte copies
        ((129, 3, 130), 2, 4),  # pitch 136 from 16 bytes in
    ]:
        big_a = cp.full((M, K + pad + offset), cp.nan, dtype=cp.float32)
        a = big_a[:, offset : offset + K]
        a[...] = rng.random((M, K), dtype=cp.float32) * 2 - 1
        big_b = cp.full((N, K + pad + offset), cp.nan, dtype=cp.float32)
        big_b[:, offset : offset + K] = rng.random((N, K), dtype=cp.float32) - 0.5
        for b in (rng.random((K, N), dtype=cp.float32) - 0.5, big_b[:, offset : offset + K].T):
            c = kernel(a, b)
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
            err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
            assert err < 1e-5, (M, N, K, pad, offset, err)


@pytest.mark.parametrize("schedule", ["data_parallel", "stream_k", "split_launch"])
def test_a_stored_k_by_m_packed_to_a_16_byte_pitch_reads_only_the_matrix(schedule):
    """warptile with TRANS_A and PACKA copies A (stored K x M) to a 16-byte row pitch first where
    M % 4 != 0: NaN stored around A would show if the copy or the kernel read past M, and pitches
    that are multiples of 4 (no copy) and 4-byte offsets are right too; B in either layout."""
    params = {**Space.load("warptile").seeds[0].as_dict(), "TRANS_A": 1, "PACKA": 1, "SCHEDULE": schedule}
    kernel = autotune.load(config=Config.make("warptile", params))
    rng = cp.random.default_rng(6)
    cases = [((67, 45, 33), 0, 0), ((1001, 130, 77), 2, 1), ((130, 3, 260), 2, 0), ((5, 7, 9), 0, 0)]
    for (M, N, K), pad, offset in cases:
        big_a = cp.full((K, M + pad + offset), cp.nan, dtype=cp.float32)
        a = big_a[:, offset : offset + M]
        a[...] = rng.random((K, M), dtype=cp.float32) * 2 - 1
        for b in (rng.random((K, N), dtype=cp.float32) - 0.5, (rng.random((N, K), dtype=cp.float32) - 0.5).T):
            c = kernel(a.T, b)
            ref = a.T.astype(cp.float64) @ b.astype(cp.float64)
            err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
            assert err < 1e-5, (M, N, K, pad, offset, err)


def test_matmul_reads_transposes_and_column_major_in_place():
    rng = cp.random.default_rng(5)
    M, N, K = 300, 200, 100
    x = rng.random((M, K), dtype=cp.float32) - 0.5
    w = rng.random((N, K), dtype=cp.float32) - 0.5
    ref = x.astype(cp.float64) @ w.T.astype(cp.float64)

    def close(out):
        return float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref)) < 1e-5

    assert close(autotune.matmul(x, w.T))  # a linear layer: the "nt" layout
    assert close(autotune.matmul(x, w, trans_b=True))
    assert close(autotune.matmul(x.T, w.T, trans_a=True))
    assert close(autotune.matmul(cp.asfortranarray(x), w.T))  # Fortran-order A: read transposed
    f_out = cp.empty((M, N), dtype=cp.float32, order="F")  # a column-major C, written as C^T
    assert autotune.matmul(x, w.T, out=f_out) is f_out and close(f_out)
    stepped = cp.zeros((M, 2 * K), dtype=cp.float32)
    stepped[:, ::2] = x
    assert close(autotune.matmul(stepped[:, ::2], w.T))  # no contiguous axis: copied
    buf = cp.zeros(M * N + M * K, dtype=cp.float32)
    a_in = buf[: M * K].reshape(M, K)
    a_in[...] = x
    with pytest.raises(ValueError, match="overlaps A"):
        autotune.matmul(a_in, w.T, out=buf[M * K - 1 : M * K - 1 + M * N].reshape(M, N))


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_example_program_checks_the_exported_header_against_cublas(tmp_path, h100, layout):
    """examples/sgemm_check.cu, built with an exported header of each layout, against cublasSgemm:
    the column-major entry point with padded leading dimensions, the row-major and contiguous
    ones, and bad arguments refused with C untouched."""
    from helpers import GPU
    from helpers import record_entry as _entry

    cfg = built_for(Space.load("warptile").fallback, layout)
    problem = Problem(1000, 1000, 1000, layout)
    update_record(tmp_path, GPU, problem, {"warptile": _entry("warptile", cfg.as_dict(), 30000.0, h100, problem)})
    export(tmp_path, GPU["slug"], problem, tmp_path / "tuned_sgemm.h")
    run_example_program(tmp_path)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_example_program_checks_a_colstage_header_against_cublas(tmp_path, h100, layout):
    """colstage exported (its ring in over 48 KB of dynamic shared memory, K split over two blocks
    that add into C scaled first, each block's stages in its own order): every entry point of the
    example agrees with cuBLAS at its shapes, B stored K x N and N x K."""
    from helpers import GPU
    from helpers import record_entry as _entry

    params = dict(NR=16, KL=2, RPW=2, WARPS=8, KSTAGE=128, STAGES=4, KSPLIT=2, ROT=1, TRANS_B=int(layout == "nt"))
    problem = Problem(4096, 16, 4096, layout)
    update_record(tmp_path, GPU, problem, {"colstage": _entry("colstage", params, 17000.0, h100, problem)})
    export(tmp_path, GPU["slug"], problem, tmp_path / "tuned_sgemm.h")
    run_example_program(tmp_path)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("layout", ["nt", "tt"])
def test_example_program_checks_a_header_that_transposes_b_first(tmp_path, h100, layout):
    """A PACKB 2 seed exported for B stored N x K: the header copies B transposed into its
    workspace before the nn (or tn) kernel, and every entry point agrees with cuBLAS."""
    from helpers import GPU
    from helpers import record_entry as _entry

    seed = next(s for s in Space.load("warptile").seeds if s["PACKB"] == 2)
    cfg = built_for(seed, layout)
    assert cfg["PACKB"] == 2
    problem = Problem(1000, 1000, 1000, layout)
    update_record(tmp_path, GPU, problem, {"warptile": _entry("warptile", cfg.as_dict(), 30000.0, h100, problem)})
    export(tmp_path, GPU["slug"], problem, tmp_path / "tuned_sgemm.h")
    assert "_pack_b<<<" in (tmp_path / "tuned_sgemm.h").read_text()
    run_example_program(tmp_path)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("schedule", ["split_launch", "split_persistent"])
def test_example_program_checks_a_split_header_that_packs_c(tmp_path, h100, schedule):
    """A split schedule exported: at the example's shapes with a row length not a multiple of 4
    (7x13x5, 127x129x131, 4096x3x257 and their column-major transposes) the whole grid is its tail,
    so C goes through the packed copy in the workspace (copied in when beta != 0, back at the end);
    every entry point still agrees with cuBLAS and leaves C untouched on bad arguments."""
    from helpers import GPU
    from helpers import record_entry as _entry

    cfg = Space.load("warptile").fallback.as_dict() | {"SCHEDULE": schedule, "PACKB": 1}
    resolved = Family.load("warptile").resolve(cfg)
    assert resolved.plan.geometry(127, 129, 131, 132).pack_c  # the case this test is for
    problem = Problem(1000, 1000, 1000)
    update_record(tmp_path, GPU, problem, {"warptile": _entry("warptile", cfg, 30000.0, h100, problem)})
    export(tmp_path, GPU["slug"], problem, tmp_path / "tuned_sgemm.h")
    assert "_unpack_c<<<" in (tmp_path / "tuned_sgemm.h").read_text()
    run_example_program(tmp_path)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_example_program_checks_a_header_of_every_layout_against_cublas(tmp_path, h100):
    """export --layouts all: one header, its cuBLAS-convention entry points dispatching each of
    the four transposes to that layout's kernel (examples/sgemm_check.cu runs all four)."""
    from helpers import GPU
    from helpers import record_entry as _entry

    problem = Problem(1000, 1000, 1000)
    for lay in ["nn", "nt", "tn", "tt"]:
        cfg = built_for(Space.load("warptile").fallback, lay)
        keyed = problem.with_layout(lay)
        update_record(tmp_path, GPU, keyed, {"warptile": _entry("warptile", cfg.as_dict(), 3e4, h100, keyed)})
    export(tmp_path, GPU["slug"], problem, tmp_path / "tuned_sgemm.h", layouts=["nn", "nt", "tn", "tt"])
    out = run_example_program(tmp_path)
    assert out.count("cublas-convention") == 4 * 6 and out.count("batch 3 strided") == 4 * 6
