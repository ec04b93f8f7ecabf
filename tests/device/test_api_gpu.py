"""On the GPU: autotune.matmul and autotune.load."""

import os
from pathlib import Path

import cupy as cp
import numpy as np
import pytest
from helpers import RESULTS, refile

import autotune
from autotune.core.types import Problem
from autotune.dispatch.table import nearest_entry
from autotune.kernels.family import cached_family
from autotune.records.results import entry_config

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _stored_results(tmp_path_factory, monkeypatch):
    """This GPU's stored results: the H200 fixtures (sm_90: a split launch at 4096^3, split-K with
    packed B at 4097^3), filed under this machine's GPU, so that no test reads results/."""
    from autotune.cli.inputs import live_limits
    from autotune.records.results import live_gpu_slug

    root = tmp_path_factory.getbasetemp() / "api-results"
    if not root.exists():
        limits = live_limits(0).to_dict()
        refile(RESULTS / "nvidia-h200", root / live_gpu_slug(), limits["name"], limits)
        # Written long ago: a folder changed within the last 2 s is read again at every call
        # (table._RACY_NS), the calls' kept shortcuts with it, when the first tests run that soon.
        os.utime(root / live_gpu_slug(), ns=(LONG_AGO_NS, LONG_AGO_NS))
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(root))


def _ref(a, b, c=None, alpha=1.0, beta=0.0):
    r = alpha * (a.astype(cp.float64) @ b.astype(cp.float64))
    return r if c is None else r + beta * c.astype(cp.float64)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1000, 1000, 1000), (4097, 33, 129), (64, 64, 8192)])
def test_matmul_is_correct(shape):
    M, N, K = shape
    a = cp.random.rand(M, K, dtype=cp.float32) - 0.5
    b = cp.random.rand(K, N, dtype=cp.float32) - 0.5
    c = cp.random.rand(M, N, dtype=cp.float32) - 0.5
    out = autotune.matmul(a, b)
    assert float(cp.linalg.norm(out - _ref(a, b)) / cp.linalg.norm(_ref(a, b))) < 1e-5
    c2 = c.copy()
    autotune.matmul(a, b, out=c2, alpha=2.0, beta=-1.0)
    ref = _ref(a, b, c, 2.0, -1.0)
    assert float(cp.linalg.norm(c2 - ref) / cp.linalg.norm(ref)) < 1e-5
    a_t = cp.asfortranarray(a)  # a non-C-contiguous array is copied, not misread
    # (not bit-identical: a split-K winner adds partial sums with atomics in any order)
    assert float(cp.linalg.norm(autotune.matmul(a_t, b) - _ref(a, b)) / cp.linalg.norm(_ref(a, b))) < 1e-5


def test_load_uses_the_stored_config_predicted_fastest():
    """A shape not tuned: the config autotune.dispatch.model predicts fastest among the stored ones (its
    record and predicted time in the source); a tuned shape: its own record, as measured."""
    from autotune.dispatch import api
    from autotune.dispatch import table as dispatch_table
    from autotune.records.results import live_gpu_slug

    slug = live_gpu_slug()
    k = autotune.load("4000x4100x4096")
    limits = api._device_limits(cp.cuda.Device().id, f"sm_{cp.cuda.Device().compute_capability}")
    tuned, _, cfg, predicted = dispatch_table.table_for(None, slug).choose(Problem(4000, 4100, 4096), None, limits)
    assert k.config == cfg and predicted > 0
    assert k.source.startswith(f"tuned for {tuned.name} on {slug}, predicted fastest here (")
    exact = autotune.load("4096x4096x4096")
    _, entry = nearest_entry(Problem(4096, 4096, 4096), slug)
    # The stored config as its family reads it today (parameters added since take their defaults).
    stored = cached_family(entry["config"]["family"]).resolve(entry_config(entry)).config
    assert exact.source == f"tuned for 4096x4096x4096 on {slug}" and exact.config == stored


def test_bad_inputs_are_clear_errors():
    a = cp.ones((4, 5), cp.float32)
    with pytest.raises(TypeError, match="float32"):
        autotune.matmul(a.astype(cp.float64), cp.ones((5, 3), cp.float32))
    with pytest.raises(ValueError, match="do not chain"):
        autotune.matmul(a, cp.ones((4, 3), cp.float32))
    with pytest.raises(TypeError, match="cupy.ndarray"):
        autotune.matmul(a.get(), cp.ones((5, 3), cp.float32))
    with pytest.raises(ValueError, match="out must have shape"):
        autotune.matmul(a, cp.ones((5, 3), cp.float32), out=cp.empty((3, 3), cp.float32))


# ---- any CUDA array in, the same kind out; streams; the dispatch caches ----------------------

LONG_AGO_NS = 1_600_000_000 * 10**9  # 2020: a results folder last changed then is trusted at once


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def _rel_err(out, ref) -> float:
    return float(cp.linalg.norm(cp.asarray(out).astype(cp.float64) - ref) / cp.linalg.norm(ref))


def _spin(stream, ms: float = 200.0) -> None:
    """Keep `stream` (a CuPy stream) busy for `ms`: work queued behind it waits that long."""
    from autotune.gpu.runner import _SPIN

    spin = cp.RawModule(code=_SPIN).get_function("autotune_spin")
    spin((1, 1, 1), (1, 1, 1), (np.uint64(int(ms * 1e6)),), stream=stream)


# 4097^3 picks the stored split-K winner with packed B (a workspace on the caller's stream).
@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (4097, 33, 129), (4097, 4097, 4097)])
def test_torch_tensors_in_torch_tensor_out(torch, shape, monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)  # torch.matmul in FP32 too
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(M, K, device="cuda", generator=g) - 0.5
    b = torch.rand(K, N, device="cuda", generator=g) - 0.5
    ref = a.double() @ b.double()
    out = autotune.matmul(a, b)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.device == a.device
    assert out.shape == (M, N) and out.is_contiguous()
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    assert float((out - torch.matmul(a, b)).norm() / torch.matmul(a, b).norm()) < 1e-5
    c = torch.rand(M, N, device="cuda", generator=g) - 0.5
    c2 = c.clone()
    assert autotune.matmul(a, b, out=c2, alpha=2.0, beta=-1.0) is c2  # `out` is what comes back
    ref2 = 2.0 * ref - c.double()
    assert float((c2.double() - ref2).norm() / ref2.norm()) < 1e-5


def test_torch_views_are_read_where_they_lie(torch):
    """A row slice is C-contiguous at an offset in its storage (here not 16-byte aligned): read
    in place; a transpose is Fortran-order: copied."""
    big, other = torch.rand(300, 201, device="cuda") - 0.5, torch.rand(150, 201, device="cuda") - 0.5
    a, b = big[1:101], other.t()  # a: 100x201 from row 1; b: 201x150
    assert a.is_contiguous() and a.data_ptr() % 16 and not b.is_contiguous()
    ref = a.double() @ b.double()
    out = autotune.matmul(a, b)
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    assert torch.equal(big[1:101], a) and torch.equal(other.t(), b)  # read, not written


def test_bad_torch_tensors_are_type_errors(torch):
    a = torch.ones(4, 5, device="cuda")
    b = torch.ones(5, 3, device="cuda")
    with pytest.raises(TypeError, match="must be on the GPU.*torch tensor on cpu"):
        autotune.matmul(a.cpu(), b)
    with pytest.raises(TypeError, match="must be on the GPU.*torch tensor on cpu"):
        autotune.matmul(a, b, out=torch.empty(4, 3))
    with pytest.raises(TypeError, match="float32.*torch.float64"):
        autotune.matmul(a.double(), b)
    with pytest.raises(TypeError, match="float32.*torch.bfloat16"):
        autotune.matmul(a, b.bfloat16())
    with pytest.raises(TypeError, match="requires grad.*detach"):
        autotune.matmul(a.requires_grad_(), b)


def test_host_arrays_are_type_errors():
    a, b = cp.ones((4, 5), cp.float32), cp.ones((5, 3), cp.float32)
    for args in [(a.get(), b), (a, b.get()), (a, b, np.empty((4, 3), np.float32))]:
        with pytest.raises(TypeError, match="must be on the GPU.*in host memory"):
            autotune.matmul(*args)
    with pytest.raises(TypeError, match="must be a cupy.ndarray"):
        autotune.matmul(a, [[1.0] * 3] * 5)


def test_cupy_current_stream_is_honoured():
    """The inputs are rewritten on a non-blocking stream behind 200 ms of spinning: a kernel
    queued anywhere but on that stream would read them before they change."""
    a_old, a_new = cp.zeros((256, 128), cp.float32), cp.random.rand(256, 128, dtype=cp.float32)
    b = cp.random.rand(128, 64, dtype=cp.float32)
    autotune.matmul(a_old, b)  # compiled and verified before the stream is held up
    a = a_old.copy()
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        _spin(stream)
        a[...] = a_new
        out = autotune.matmul(a, b)
        c = cp.zeros((256, 64), cp.float32)
        autotune.matmul(a, b, out=c, alpha=1.0, beta=1.0)
    stream.synchronize()
    ref = a_new.astype(cp.float64) @ b.astype(cp.float64)
    assert _rel_err(out, ref) < 1e-5 and _rel_err(c, ref) < 1e-5


def test_torch_current_stream_is_honoured(torch):
    a_new = torch.rand(256, 128, device="cuda")
    b = torch.rand(128, 64, device="cuda")
    a = torch.zeros_like(a_new)
    autotune.matmul(a, b)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()  # torch's pool: non-blocking streams
    with torch.cuda.stream(stream):
        from autotune.dispatch.interop import _foreign_stream

        _spin(_foreign_stream(stream.cuda_stream))
        a.copy_(a_new)
        out = autotune.matmul(a, b)
    stream.synchronize()
    ref = a_new.double() @ b.double()
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5


class _OnlyDLPack:
    def __init__(self, x):
        self.x = x

    def __dlpack__(self, **kwargs):
        return self.x.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class _OnlyCAI:
    def __init__(self, x):
        self.__cuda_array_interface__ = x.__cuda_array_interface__
        self.x = x  # keeps the memory alive


def test_dlpack_and_cuda_array_interface_objects_are_taken_without_copies():
    a = cp.random.rand(100, 70, dtype=cp.float32)
    b = cp.random.rand(70, 50, dtype=cp.float32)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    for wrap in (_OnlyDLPack, _OnlyCAI):
        out = cp.zeros((100, 50), cp.float32)
        assert autotune.matmul(wrap(a), wrap(b), out=wrap(out)).x is out  # written in place
        assert _rel_err(out, ref) < 1e-5
        assert isinstance(autotune.matmul(wrap(a), b), cp.ndarray)  # a new output: CuPy's


def test_numba_arrays_in_numba_array_out():
    numba_cuda = pytest.importorskip("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("numba without CUDA")
    a = np.random.default_rng(0).random((100, 70), dtype=np.float32)
    b = np.random.default_rng(1).random((70, 50), dtype=np.float32)
    out = autotune.matmul(numba_cuda.to_device(a), numba_cuda.to_device(b))
    assert type(out).__module__.startswith("numba")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(out.copy_to_host() - ref) / np.linalg.norm(ref) < 1e-5


def test_a_repeated_call_reads_no_record_and_loads_no_kernel(monkeypatch):
    from autotune.dispatch import api
    from autotune.gpu import runner
    from autotune.records import results
    from autotune.records.results import live_gpu_slug

    folder = Path(os.environ["AUTOTUNE_RESULTS"]) / live_gpu_slug()
    os.utime(folder, ns=(LONG_AGO_NS, LONG_AGO_NS))  # a table read now is trusted at once
    a, b = cp.random.rand(300, 200, dtype=cp.float32), cp.random.rand(200, 100, dtype=cp.float32)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    assert _rel_err(autotune.matmul(a, b), ref) < 1e-5
    reads, loads = [], []
    monkeypatch.setattr(results, "load_record", lambda path: reads.append(path))
    monkeypatch.setattr(api, "_kernel", lambda *args: loads.append(args))
    monkeypatch.setattr(runner, "device_info", lambda *args: loads.append(("device_info", args)))
    for _ in range(3):
        assert _rel_err(autotune.matmul(a, b), ref) < 1e-5
    assert reads == [] and loads == []
    kernel = api.load((300, 100, 200))
    assert api.load((300, 100, 200)) is kernel and reads == [] and loads == []


def test_the_loaded_kernel_keeps_each_shapes_geometry():
    k = autotune.load("4097x4097x4097")
    loaded = k._kernel
    for shape in [(4097, 4097, 4097), (1, 1, 1), (300, 4097, 70)]:
        assert loaded.geometry(*shape) == loaded.plan.geometry(*shape, loaded.slots)
        assert loaded.geometry(*shape) is loaded.geometry(*shape)


def test_torch_calls_seen_before_take_the_short_road_and_stay_right(torch, monkeypatch):
    # The short road serves a call like one the full road served in place; every variation that
    # could change the full road's answer (alignment, strides, transposes, grad, a stream) is a key
    # of its own, so each result here must equal torch's on its first and its repeated calls.
    from autotune.dispatch import api

    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    g = torch.Generator(device="cuda").manual_seed(3)
    big = torch.rand(130, 131, device="cuda", generator=g) - 0.5
    w = torch.rand(97, 131, device="cuda", generator=g) - 0.5
    side = torch.cuda.Stream()
    cases = [
        (big[:, :128], w[:, :128].t(), {}),  # 16-byte aligned rows, B transposed in place
        (big[:, 1:129], w[:, 1:129].t(), {}),  # the same shapes and strides, 4 bytes off
        (big[:, :128], w[:, :128], {"trans_b": True}),
        (big[:97, :128].t(), w[:, :128].t(), {"trans_a": True}),  # A read as its transpose twice
        (big.t()[:, :64], big[:64], {}),  # column-major A
    ]
    for a, b, kw in cases:
        want = torch.matmul(a.t() if kw.get("trans_a") else a, b.t() if kw.get("trans_b") else b)
        for stream in (None, side, None):
            with torch.cuda.stream(stream or torch.cuda.current_stream()):
                got = autotune.matmul(a, b, alpha=0.5, **kw)
            torch.cuda.synchronize()
            assert float((got - 0.5 * want).norm() / (0.5 * want).norm()) < 1e-5, (a.shape, a.stride(), kw)
    dev = torch.cuda.current_device()
    table = api.table_for(None, api._device_props(dev)[0])
    assert table.shortcuts, "no call was kept for the short road"
    x = big[:, :128].clone().requires_grad_(True)
    for _ in range(2):  # refused on the full road, and so every time
        with pytest.raises(TypeError, match="requires grad"):
            autotune.matmul(x, w[:, :128].t())


def test_cupy_calls_and_batches_seen_before_take_the_short_road_and_stay_right(torch):
    # CuPy arrays and batches (broadcast, 4-D, transposed matrices, a copied operand) on the
    # short road: each result equal to float64's on its first and repeated calls, on two streams.
    from autotune.dispatch import api, shortcut

    rng = cp.random.default_rng(5)
    x = rng.random((6, 40, 33), dtype=cp.float32) - 0.5
    w = rng.random((33, 24), dtype=cp.float32) - 0.5
    wide = rng.random((2, 3, 24, 33), dtype=cp.float32) - 0.5
    cases = [
        (x, w, {}),  # B 2-D, shared by every matrix
        (x[:1], rng.random((5, 33, 24), dtype=cp.float32) - 0.5, {}),  # A's batch of 1 broadcast
        (rng.random((2, 3, 40, 33), dtype=cp.float32) - 0.5, wide, {"trans_b": True}),  # 4-D, nt
        (x.swapaxes(1, 2), w, {"trans_a": True}),  # A's matrices column-major, read in place
        (x[::2], w, {}),  # every other matrix: one stride apart still
        (x[:, :, ::2], w[:17], {}),  # no contiguous axis: copied on the full road, never cut short
        (rng.random((40, 33), dtype=cp.float32) - 0.5, w, {}),  # 2-D CuPy
    ]
    side = cp.cuda.Stream(non_blocking=True)
    for a, b, kw in cases:
        oa = a.swapaxes(-1, -2) if kw.get("trans_a") else a
        ob = b.swapaxes(-1, -2) if kw.get("trans_b") else b
        want = cp.matmul(oa.astype(cp.float64), ob.astype(cp.float64)) * 0.5
        for stream in (None, side, None):
            with stream or cp.cuda.get_current_stream():
                got = autotune.matmul(a, b, alpha=0.5, **kw)
            cp.cuda.Device().synchronize()
            assert got.shape == want.shape
            assert float(cp.linalg.norm(got - want) / cp.linalg.norm(want)) < 1e-5, (a.shape, a.strides, kw)
    table = api.table_for(None, api._device_props(cp.cuda.Device().id)[0])
    cuts = [c for c in table.shortcuts.values() if isinstance(c, shortcut.CupyShortcut)]
    assert any(c.batch > 1 for c in cuts) and any(c.batch == 1 for c in cuts)
    t = torch.rand(4, 40, 33, device="cuda") - 0.5  # torch batches too
    for _ in range(2):
        got = autotune.matmul(t, torch.as_tensor(w, device="cuda"))
        want = t.double() @ torch.as_tensor(w, device="cuda").double()
        assert float((got - want).norm() / want.norm()) < 1e-5
    assert any(isinstance(c, shortcut.TorchShortcut) and c.batch == 4 for c in table.shortcuts.values())


def test_calls_into_an_out_seen_before_take_the_short_road_and_an_overlap_is_still_refused(torch):
    # The short road into `out`: beta 0 and not, CuPy and torch, a batch; each repeated call right,
    # and an `out` of a kept call's form laid over an operand meets the full road's refusal.
    from autotune.dispatch import api, shortcut

    rng = cp.random.default_rng(11)
    cases = [((40, 33), (33, 40)), ((3, 24, 17), (17, 20)), ((70, 5), (5, 300))]
    for sa, sb in cases:
        a, b = rng.random(sa, dtype=cp.float32) - 0.5, rng.random(sb, dtype=cp.float32) - 0.5
        c0 = rng.random((*sa[:-1], sb[-1]), dtype=cp.float32) - 0.5
        for beta in (0.0, 1.5, 0.0, 1.5):
            for kind in ("cupy", "torch"):
                out = c0.copy()
                x, y, o = (a, b, out) if kind == "cupy" else (torch.as_tensor(v, device="cuda") for v in (a, b, out))
                assert autotune.matmul(x, y, o, 0.5, beta) is o
                torch.cuda.synchronize()
                err = float(cp.linalg.norm(out - _ref(a, b, c0, 0.5, beta)) / cp.linalg.norm(_ref(a, b, c0, 0.5, beta)))
                assert err < 1e-5, (sa, sb, beta, kind)
    table = api.table_for(None, api._device_props(cp.cuda.Device().id)[0])
    cuts = [c for c in table.shortcuts.values() if c.spans is not None]
    assert any(isinstance(c, shortcut.CupyShortcut) for c in cuts) and any(c.batch == 3 for c in cuts)
    assert any(isinstance(c, shortcut.TorchShortcut) for c in cuts)
    buf = rng.random(3 * 1600, dtype=cp.float32) - 0.5
    x, y, w = (buf[i * 1600 : (i + 1) * 1600].reshape(40, 40) for i in range(3))
    for _ in range(2):
        autotune.matmul(x, w, out=y)  # apart: kept
    for out, name in ((x, "A"), (w, "B")):
        with pytest.raises(ValueError, match=f"overlaps {name}"):
            autotune.matmul(x, w, out=out)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_cublas_behind_a_kernels_launch_is_right_in_each_layout_batch_and_pitch(layout):
    # What a first call may keep (dispatch/measure.py): the same placement as the kernels, padded
    # pitches, a column-major C, a broadcast batch, beta != 0.
    from autotune.dispatch import api, measure

    ta, tb = layout[0] == "t", layout[1] == "t"
    cub = measure.CublasKernel(api._choose(0, Problem(67, 45, 33, layout)))
    rng = cp.random.default_rng(7)

    def stored(rows, cols, trans, lead=()):  # op(X) = rows x cols, stored as the layout says, padded
        x = rng.random((*lead, *((cols, rows + 3) if trans else (rows, cols + 3))), dtype=cp.float32) - 0.5
        x = x[..., :cols] if not trans else x[..., :rows]
        return x.swapaxes(-1, -2) if trans else x

    for lead_a, lead_b in (((), ()), ((3,), (3,)), ((3,), ())):
        a, b = stored(67, 33, ta, lead_a), stored(33, 45, tb, lead_b)
        lead = lead_a or lead_b
        outs = [rng.random((*lead, 67, 48), dtype=cp.float32)[..., :45]]
        if not lead:
            outs.append(cp.asfortranarray(rng.random((67, 45), dtype=cp.float32)))
        for c in outs:
            c0 = c.copy()
            cub(a, b, c, 1.5, -0.5)
            want = _ref(a, b, c0, 1.5, -0.5)
            assert float(cp.linalg.norm(c - want) / cp.linalg.norm(want)) < 1e-6, (lead_a, lead_b, c.strides)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_cublas_kept_for_the_short_road_is_right_on_new_operands_of_the_calls_form(layout):
    # A shortcut of cuBLAS (its arguments bound once, measure.CublasLaunch.bind) run on other
    # arrays of the same form: padded pitches, a batch, beta 0 and not, each result right.
    from autotune.dispatch import api, arrays, measure, shortcut

    ta, tb = layout[0] == "t", layout[1] == "t"
    rng = cp.random.default_rng(13)

    def stored(rows, cols, trans, lead):  # op(X) = rows x cols as a view of X stored as the layout says
        x = rng.random((*lead, *((cols, rows + 3) if trans else (rows, cols + 3))), dtype=cp.float32) - 0.5
        x = x[..., :cols] if not trans else x[..., :rows]
        return x.swapaxes(-1, -2) if trans else x

    for lead, beta in (((), 0.0), ((), -0.5), ((3,), 0.0), ((3,), 2.0)):
        batch = lead[0] if lead else 1
        cub = measure.CublasKernel(api._choose(0, Problem(67, 45, 33, layout, batch)))
        a, b, c = stored(67, 33, ta, lead), stored(33, 45, tb, lead), cp.zeros((*lead, 67, 45), cp.float32)
        ops = arrays.prepare(a, b, c, beta)
        assert shortcut.fits(a, b, ops, cub, c)
        cut = shortcut.made(a, b, c, cub, ops)
        assert cut.bound is not None
        for _ in range(3):
            a, b = stored(67, 33, ta, lead), stored(33, 45, tb, lead)
            c = rng.random((*lead, 67, 45), dtype=cp.float32) - 0.5
            c0 = c.copy()
            assert cut(a, b, 1.5, c, beta) is c
            want = _ref(a, b, c0, 1.5, beta)
            assert float(cp.linalg.norm(c - want) / cp.linalg.norm(want)) < 1e-6, (layout, lead, beta)


def test_a_first_call_with_beta_adds_c_once_and_a_captured_first_call_replays_right(monkeypatch):
    # The first call of a new shape times its contenders: into a scratch C when beta != 0, so the
    # caller's C is scaled once; a call being captured into a CUDA graph is not timed.
    from autotune.dispatch import api, measure

    monkeypatch.setenv(measure.ENV, "1")

    rng = cp.random.default_rng(8)
    for M, N, K in ((97, 61, 45), (1, 300, 70), (257, 129, 3)):
        a = rng.random((M, K), dtype=cp.float32) - 0.5
        b = rng.random((K, N), dtype=cp.float32) - 0.5
        c = rng.random((M, N), dtype=cp.float32) - 0.5
        for _ in range(2):  # the first call times, the second is settled
            out = c.copy()
            autotune.matmul(a, b, out=out, alpha=2.0, beta=-1.0)
            want = _ref(a, b, c, 2.0, -1.0)
            assert float(cp.linalg.norm(out - want) / cp.linalg.norm(want)) < 1e-5, (M, N, K)
    a = rng.random((83, 59), dtype=cp.float32) - 0.5
    b = rng.random((59, 71), dtype=cp.float32) - 0.5
    a0, b0 = a.copy(), b.copy()  # a failure then says whether the operands changed under the calls
    out = cp.empty((83, 71), dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    stream.wait_event(cp.cuda.get_current_stream().record())  # it would not wait for A's and B's writes
    pick = api._choose(0, Problem(83, 71, 59))
    with stream:
        pick(a, b, out)  # compiled, checked and its workspace on this stream made before the capture
        stream.synchronize()
        out.fill(cp.nan)
        stream.begin_capture()
        autotune.matmul(a, b, out=out)
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
    changed = int((a != a0).sum()), int((b != b0).sum())
    assert changed == (0, 0), f"{changed} elements of A and B changed under {pick.config.name}'s calls"
    want = _ref(a, b)
    assert float(cp.linalg.norm(out - want) / cp.linalg.norm(want)) < 1e-5, pick.config.name


def _on_a_new_thread(fn):
    """Return (the CUDA context current when a new thread began, fn() run on that thread)."""
    import threading

    from cupy_backends.cuda.api import driver

    got = {}

    def run():
        try:
            got["context"] = driver.ctxGetCurrent()
            got["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            got["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in got:
        raise got["error"]
    return got["context"], got["value"]


@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_a_thread_that_made_no_cuda_call_gets_its_products(kind, request):
    # torch's autograd engine runs a backward on such a thread: the driver refused the kernels'
    # launches and module loads there (CUDA_ERROR_INVALID_CONTEXT) until matmul bound a context.
    wrap = cp.asarray
    if kind == "torch":
        torch = request.getfixturevalue("torch")
        wrap = torch.from_dlpack
    rng = cp.random.default_rng(5)
    a, b = (rng.random(s, dtype=cp.float32) - 0.5 for s in ((96, 64), (64, 80)))
    seen = autotune.matmul(wrap(a), wrap(b))  # the main thread's call: the next takes the short road
    assert _rel_err(seen, _ref(a, b)) < 1e-5
    a2, b2 = a[:77, :40], b[:40, :53]
    runs = {  # the short road, a first call, and a kernel loaded for another shape, then called
        "short": (a, b, lambda: autotune.matmul(wrap(a), wrap(b))),
        "first": (a2, b2, lambda: autotune.matmul(wrap(a2), wrap(b2))),
        "load": (a2, b2, lambda: autotune.load((77, 53, 41))(wrap(a2), wrap(b2))),
    }
    for x, y, call in runs.values():
        context, c = _on_a_new_thread(call)
        assert context == 0  # the case itself: the new thread had no current context
        cp.cuda.Device().synchronize()
        assert _rel_err(c, _ref(x, y)) < 1e-5
