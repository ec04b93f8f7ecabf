"""On the GPU: strided batches in every family that runs them and every layout, through the search's
evaluator (one launch, checked against cuBLAS), autotune.load and autotune.matmul (broadcasts,
interleaved heads, transposed and column-major matrices, a batch longer than one grid), the bad
batches matmul refuses, and a batched header's example program against
cublasSgemmStridedBatched."""

import cupy as cp
import numpy as np
import pytest
from helpers import have_nvcc, run_example_program
from test_correctness import CONFIGS

import autotune
from autotune.core.types import Problem, Status
from autotune.dispatch import arrays
from autotune.dispatch.table import built_for
from autotune.kernels.family import Family
from autotune.kernels.space import Space
from autotune.records.export import export
from autotune.records.store import update_record

pytestmark = pytest.mark.gpu

LAYOUTS = ["nn", "nt", "tn", "tt"]
SHAPES = [(1, 1, 1, 2), (7, 13, 5, 3), (127, 129, 131, 4), (96, 100, 4, 5), (33, 1, 700, 3), (1, 260, 64, 7)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])) + f"_b{s[3]}")
def test_every_batching_family_correct_on_a_batch(gpu_evaluator, layout, shape):
    """The evaluator's verification (alpha, beta, a NaN-poisoned C) of each test config built for
    the batch: every matrix of C against cuBLAS's strided batched product."""
    problem = Problem(*shape[:3], layout, shape[3])
    built = (built_for(c, layout, shape[3]) for c in CONFIGS if not Family.load(c.family).gaps(problem))
    configs = list(dict.fromkeys(c for c in built if c is not None))
    assert {c.family for c in configs} == {"tiled", "coarse1d", "coarse2d", "vectorized", "warptile", "tiny", "panel"}
    ms = gpu_evaluator.evaluate(configs, problem, verify_only=True)
    ran = [m for m in ms if m.status is not Status.REJECTED]  # CONFIGS holds some that spill
    assert {m.config.family for m in ran} == {c.family for c in configs}
    bad = [f"{m.config.name}: {m.status.value} {m.message}" for m in ran if m.status is not Status.OK]
    assert not bad, "\n".join(bad)


def _close(out, ref, tol=1e-5):
    return float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref)) < tol


def test_matmul_on_batches_broadcasts_like_cupy():
    rng = cp.random.default_rng(7)
    a = rng.random((6, 70, 40), dtype=cp.float32) - 0.5
    b = rng.random((6, 40, 50), dtype=cp.float32) - 0.5
    w = rng.random((50, 40), dtype=cp.float32) - 0.5
    f64 = lambda x: x.astype(cp.float64)  # noqa: E731
    assert _close(autotune.matmul(a, b), f64(a) @ f64(b))
    assert _close(autotune.matmul(a, w.T), f64(a) @ f64(w).T)  # one weight for every matrix: stride 0
    assert _close(autotune.matmul(a, w, trans_b=True), f64(a) @ f64(w).T)
    at, bt = cp.ascontiguousarray(a.swapaxes(1, 2)), cp.ascontiguousarray(b.swapaxes(1, 2))
    assert _close(autotune.matmul(at, bt, trans_a=True, trans_b=True), f64(a) @ f64(b))  # tt
    four = rng.random((2, 1, 70, 40), dtype=cp.float32) - 0.5
    assert _close(autotune.matmul(four, b), f64(four) @ f64(b))  # (2, 1) x (6,) -> (2, 6)
    assert autotune.matmul(four, b).shape == (2, 6, 70, 50)
    out = cp.empty((6, 50, 70), dtype=cp.float32).swapaxes(1, 2)  # column-major matrices
    c0 = rng.random((6, 70, 50), dtype=cp.float32)
    out[...] = c0
    assert autotune.matmul(a, b, out=out, alpha=2.0, beta=-1.0) is out
    assert _close(out, 2 * (f64(a) @ f64(b)) - c0)


def test_interleaved_heads_are_read_and_written_in_place():
    """Attention's layout: (seq, heads, dim) tensors viewed as (heads, seq, dim) batches. Neither
    the operands nor out is copied, and out lands between the other heads' columns."""
    rng = cp.random.default_rng(8)
    seq, heads, dim = 100, 6, 32
    qkv = rng.random((seq, 3, heads, dim), dtype=cp.float32) - 0.5
    q, k = qkv[:, 0].transpose(1, 0, 2), qkv[:, 1].transpose(1, 0, 2)  # (heads, seq, dim)
    scores = cp.zeros((seq, heads, seq + 3), dtype=cp.float32)  # out with a padded row
    out = scores[:, :, :seq].transpose(1, 0, 2)  # (heads, seq, seq)
    ops = arrays.prepare(q, k, out, 0.0, trans_b=True)
    assert ops.batch == heads and ops.a.data.ptr == q.data.ptr and ops.b.data.ptr == k.data.ptr
    assert ops.strides == (dim, dim, seq + 3) and ops.layout == "nt"
    autotune.matmul(q, k, out=out, trans_b=True)
    ref = q.astype(cp.float64) @ k.astype(cp.float64).swapaxes(1, 2)
    assert _close(out, ref) and not bool(scores[:, :, seq:].any())
    # A query block that is qkv itself: out may sit beside A in the same buffer as long as no
    # element is shared (checked exactly, not by extents).
    buf = cp.zeros((seq, 2, heads, dim), dtype=cp.float32)
    buf[:, 0] = qkv[:, 0]
    a_in = buf[:, 0].transpose(1, 0, 2)
    w = rng.random((dim, dim), dtype=cp.float32)
    autotune.matmul(a_in, w, out=buf[:, 1].transpose(1, 0, 2))
    assert _close(buf[:, 1].transpose(1, 0, 2), a_in.astype(cp.float64) @ w.astype(cp.float64))
    with pytest.raises(ValueError, match="overlaps A"):
        autotune.matmul(a_in, w, out=buf[:, 0].transpose(1, 0, 2))


def test_bad_batches_are_refused_before_anything_runs():
    rng = cp.random.default_rng(9)
    a = rng.random((4, 8, 6), dtype=cp.float32)
    b = rng.random((3, 6, 5), dtype=cp.float32)
    with pytest.raises(ValueError, match="do not broadcast"):
        autotune.matmul(a, b)
    with pytest.raises(ValueError, match=r"out must have shape \(4, 8, 5\)"):
        autotune.matmul(a, b[:1], out=cp.empty((8, 5), dtype=cp.float32))
    c = cp.zeros((8, 5), dtype=cp.float32)
    with pytest.raises(ValueError, match="overlap each other"):
        autotune.matmul(a, b[:1], out=cp.broadcast_to(c, (4, 8, 5)))
    with pytest.raises(ValueError, match="must be 2-D"):
        autotune.matmul(a[0, 0], b[0])
    with pytest.raises(TypeError, match="float32"):
        autotune.matmul(a.astype(cp.float64), b[:1])
    stepped = cp.zeros((8, 8, 5), dtype=cp.float32)[::2]  # batch axis one stride apart: fine
    assert autotune.matmul(a, b[:1], out=stepped) is stepped
    gappy = cp.zeros((2, 3, 8, 5), dtype=cp.float32)[:, :2]  # two batch axes, not one stride apart
    with pytest.raises(ValueError, match="one stride apart"):
        autotune.matmul(a.reshape(2, 2, 8, 6), b[:1], out=gappy)


def test_inputs_whose_batch_axes_are_not_one_stride_apart_are_copied():
    rng = cp.random.default_rng(10)
    big = rng.random((2, 3, 20, 9), dtype=cp.float32)
    a = big[:, :2]  # (2, 2, 20, 9): the two batch axes are not one stride apart
    b = rng.random((9, 11), dtype=cp.float32)
    assert _close(autotune.matmul(a, b), a.astype(cp.float64) @ b.astype(cp.float64))


def test_a_kernel_for_one_matrix_runs_a_batch_a_matrix_at_a_time():
    kernel = autotune.load(config=Space.load("vectorized").fallback)
    assert not kernel.batched
    rng = cp.random.default_rng(11)
    a, b = rng.random((5, 33, 17), dtype=cp.float32), rng.random((17, 29), dtype=cp.float32)
    assert _close(kernel(a, b), a.astype(cp.float64) @ b.astype(cp.float64))


def test_a_batch_longer_than_one_grid():
    """More than 65535 matrices: the launcher goes through grid z in pieces."""
    kernel = autotune.load(config=built_for(Space.load("tiled").fallback, "nn", 70000))
    assert kernel.batched
    rng = cp.random.default_rng(12)
    a, b = rng.random((70000, 3, 2), dtype=cp.float32), rng.random((70000, 2, 4), dtype=cp.float32)
    out = kernel(a, b)
    assert _close(out, a.astype(cp.float64) @ b.astype(cp.float64))
    assert bool(cp.isfinite(out[-1]).all()) and float(cp.abs(out[-1]).sum()) > 0


def test_torch_batches_in_and_out():
    torch = pytest.importorskip("torch")
    a = torch.rand((4, 30, 20), device="cuda") - 0.5
    w = torch.rand((25, 20), device="cuda") - 0.5
    out = autotune.matmul(a, w.T)
    assert isinstance(out, torch.Tensor) and out.shape == (4, 30, 25)
    ref = a.double() @ w.double().T
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_example_program_checks_a_batched_header_against_cublas(tmp_path, h100, layout):
    """examples/sgemm_check.cu with a header exported from a batched record: every entry point,
    the strided batched one (gaps between matrices, B broadcast) against
    cublasSgemmStridedBatched."""
    from helpers import GPU
    from helpers import record_entry as _entry

    cfg = built_for(Space.load("warptile").fallback, layout, 8)
    problem = Problem(1000, 1000, 1000, layout, 8)
    update_record(tmp_path, GPU, problem, {"warptile": _entry("warptile", cfg.as_dict(), 30000.0, h100, problem)})
    export(tmp_path, GPU["slug"], problem, tmp_path / "tuned_sgemm.h")
    assert "runs a batch in one launch" in (tmp_path / "tuned_sgemm.h").read_text()
    out = run_example_program(tmp_path)
    assert out.count("batch 3 strided") == 6


def _operand(rng, n: int, rows: int, cols: int, trans: bool):
    """Return a random float32 batch operand of op() rows x cols, lying one of nine ways."""
    r, c = (cols, rows) if trans else (rows, cols)
    kind = rng.choice(["3d", "2d", "one", "colmajor", "step", "padded", "nocontig", "vector", "4d"])
    if kind == "vector":  # refused
        return cp.random.rand(c, dtype=cp.float32)
    if kind == "4d":  # two batch axes: the full placement's
        return cp.random.rand(1, n, r, c, dtype=cp.float32)
    if kind == "2d":
        return cp.random.rand(r, c, dtype=cp.float32)
    if kind == "one":
        return cp.random.rand(1, r, c, dtype=cp.float32)
    if kind == "colmajor":  # each matrix column-major
        return cp.random.rand(n, c, r, dtype=cp.float32).swapaxes(1, 2)
    if kind == "step":  # every other matrix
        return cp.random.rand(2 * n, r, c, dtype=cp.float32)[::2]
    if kind == "padded":  # rows padded
        return cp.random.rand(n, r, c + 3, dtype=cp.float32)[:, :, :c]
    if kind == "nocontig":  # no contiguous axis: copied
        return cp.random.rand(n, r, 2 * c, dtype=cp.float32)[:, :, ::2]
    return cp.random.rand(n, r, c, dtype=cp.float32)


def _forms(seed: int):
    """Yield random batches of CuPy operands and outs, plain and not: (A, B, out, trans_a, trans_b)."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n, M, N, K = int(rng.choice([1, 2, 3, 7])), *(int(v) for v in rng.integers(1, 9, 3))
        ta, tb = bool(rng.integers(2)), bool(rng.integers(2))
        A, B = _operand(rng, n, M, K, ta), _operand(rng, n, K, N, tb)
        try:
            lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        except ValueError:
            lead = (n,)
        kind = str(rng.choice(["none", "plain", "padded", "colmajor", "overlap", "flat"]))
        if kind == "overlap":  # out over A's memory: refused
            base = cp.empty(max(A.size, int(np.prod(lead)) * M * N) + 64, dtype=cp.float32)
            A = base[: A.size].reshape(A.shape)
        out = {
            "none": None,
            "plain": cp.empty((*lead, M, N), dtype=cp.float32),
            "padded": cp.empty((*lead, M, N + 2), dtype=cp.float32)[..., :N],
            "colmajor": cp.empty((*lead, N, M), dtype=cp.float32).swapaxes(-1, -2),
            "flat": cp.empty((M, N), dtype=cp.float32),  # refused: not the batch's shape
            "overlap": base[: int(np.prod(lead)) * M * N].reshape(*lead, M, N) if kind == "overlap" else None,
        }[kind]
        yield A, B, out, ta, tb


def test_a_plain_batch_is_placed_as_the_full_placement_places_it():
    # The short placement (_plain_batch) answers for the batches it takes exactly what the full
    # one does (the same views, pitches, strides and layout), and takes no other: a copy, a
    # column-major out and an overlapping out (refused) go the full way.
    taken = 0
    for A, B, out, ta, tb in _forms(11):
        beta = 0.0 if out is None else 1.0
        fast = arrays._plain_batch(A, B, out, beta, ta, tb)
        try:
            full = arrays._adopted(A, B, out, beta, None, ta, tb)
        except (TypeError, ValueError):
            assert fast is None
            continue
        if fast is None:
            continue
        taken += 1
        for f in ("M", "N", "K", "layout", "pitches", "batch", "strides", "result"):
            if f != "result" or out is not None:
                assert getattr(fast, f) is getattr(full, f) or getattr(fast, f) == getattr(full, f), f
        for x, y in ((fast.a, full.a), (fast.b, full.b)):
            assert (x.data.ptr, x.shape, x.strides) == (y.data.ptr, y.shape, y.strides)
        assert (fast.c.shape, fast.c.strides) == (full.c.shape, full.c.strides)
        assert out is None or fast.c.data.ptr == full.c.data.ptr
    assert taken >= 40, taken
