"""matmul's first call of a new shape without a GPU: cuBLAS's arguments for each layout, the
contenders it times, the one it keeps, and what it does where it cannot time."""

import ctypes
import itertools
import random
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import RESULTS

from autotune.core.types import Problem, UserError
from autotune.dispatch import api, measure
from autotune.dispatch import table as dispatch_table

SLUG = "nvidia-h200"


def _colmajor_gemm(args, alpha, beta, mem: dict, c: np.ndarray) -> None:
    """Run cuBLAS's column-major SGEMM as `gemm_args` asks for it, on flat arrays (a model of cuBLAS)."""
    ta, tb, m, n, k, lda, ldb, ldc = args

    def read(buf, ld, rows, cols, trans):  # op(X), rows x cols, of X stored column-major at pitch ld
        stored = (cols, rows) if trans else (rows, cols)
        x = np.array([[buf[i + j * ld] for j in range(stored[1])] for i in range(stored[0])])
        return x.T if trans else x

    x1 = read(mem["b"], lda, m, k, ta)  # cuBLAS's A is B's memory
    x2 = read(mem["a"], ldb, k, n, tb)
    got = alpha * (x1 @ x2)
    for i, j in itertools.product(range(m), range(n)):
        c[i + j * ldc] = got[i, j] + beta * c[i + j * ldc]


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_cublas_is_asked_for_the_row_major_product_in_each_layout_and_pitch(layout):
    # The arguments, run through a column-major SGEMM, give the row-major C = alpha op(A) op(B)
    # + beta C at padded pitches: cuBLAS reads the very memory the kernels read.
    rng = random.Random(layout)
    for _ in range(6):
        M, N, K = (rng.randint(1, 7) for _ in range(3))
        ta, tb = layout[0] == "t", layout[1] == "t"
        lda = (M if ta else K) + rng.randint(0, 3)
        ldb = (K if tb else N) + rng.randint(0, 3)
        ldc = N + rng.randint(0, 3)
        a_rows, b_rows = (K if ta else M), (N if tb else K)
        a = np.random.default_rng(1).random(a_rows * lda)
        b = np.random.default_rng(2).random(b_rows * ldb)
        c = np.random.default_rng(3).random(M * ldc)
        A = a.reshape(a_rows, lda)[:, : (M if ta else K)]
        B = b.reshape(b_rows, ldb)[:, : (K if tb else N)]
        want = 1.5 * ((A.T if ta else A) @ (B.T if tb else B)) - 0.5 * c.reshape(M, ldc)[:, :N]
        args = measure.gemm_args(layout, M, N, K, (lda, ldb, ldc))
        _colmajor_gemm(args, 1.5, -0.5, {"a": a, "b": b}, c)
        np.testing.assert_allclose(c.reshape(M, ldc)[:, :N], want, rtol=1e-12)


def test_a_call_cublas_would_refuse_is_not_given_to_it():
    assert measure.gemm_args("nn", 4, 5, 6, (6, 5, 5)) is not None
    assert measure.gemm_args("nn", 4, 5, 6, (6, 4, 5)) is None  # B's pitch below its row
    assert measure.gemm_args("tn", 4, 5, 6, (3, 5, 5)) is None  # A^T's pitch below M
    assert measure.gemm_args("nn", 4, 5, 6, (6, 5, 4)) is None  # C's pitch below N
    assert measure.gemm_args("nn", 4, 5, 2**31, (2**31, 5, 5)) is None  # past cuBLAS's int


def test_a_refused_call_runs_the_fallback_kernel_with_every_argument():
    calls = []
    launch = measure.CublasLaunch("nn", lambda *args: calls.append(args))
    launch.launch(4, 5, 6, 10, 20, 30, 1.5, 0.5, "s", (6, 4, 5), 1, None)  # ldb 4 < N
    launch.launch(0, 5, 6, 10, 20, 30, 1.5, 0.5, "s", (6, 5, 5), 1, None)  # empty: the kernel's way
    assert calls == [
        (4, 5, 6, 10, 20, 30, 1.5, 0.5, "s", (6, 4, 5), 1, None),
        (0, 5, 6, 10, 20, 30, 1.5, 0.5, "s", (6, 5, 5), 1, None),
    ]


def test_a_bound_launch_asks_cublas_what_launch_asks(monkeypatch):
    # matmul's short road runs cuBLAS through `bind` (and `launch` through it too): the calls it
    # makes are gemm_args' at every layout, pitch and batch, the same from either, and None (the
    # full launch, then its fallback) where launch falls back.
    calls = []

    def recorder(name):
        def call(*args):
            calls.append((name, *(getattr(x, "value", x) for x in args)))
            return 0

        return call

    names = ("cublasSetStream_v2", "cublasSgemm_v2", "cublasSgemmStridedBatched")
    lib = SimpleNamespace(**{n: recorder(n) for n in names})
    monkeypatch.setattr(measure, "_pieces", lambda: (ctypes.c_float, int, None, lambda: 0, lib))
    monkeypatch.setattr(measure, "_handle", lambda dev: f"handle{dev}")
    rng = random.Random(7)
    stream, bound_some = SimpleNamespace(ptr=99), 0
    for _ in range(300):
        layout = rng.choice(["nn", "nt", "tn", "tt"])
        M, N, K = (rng.choice([0, 1, 5, 64, 2**31]) if rng.random() < 0.1 else rng.randint(1, 300) for _ in range(3))
        pitches = rng.choice([None, tuple(rng.randint(1, 400) for _ in range(3))])
        batch = rng.choice([1, 1, 3])
        strides = rng.choice([None, (7, 8, 9)])
        alpha, beta = rng.random(), rng.choice([0.0, 0.5])
        fell = []
        launch = measure.CublasLaunch(layout, lambda *args, seen=fell: seen.append(args))
        calls.clear()
        launch.launch(M, N, K, 10, 20, 30, alpha, beta, stream, pitches, batch, strides)
        want = list(calls)
        run = launch.bind(M, N, K, pitches, batch, strides)
        assert (run is None) == bool(fell)
        if run is not None:
            calls.clear()
            run(10, 20, 30, alpha, beta, stream)
            assert calls == want and calls[0] == ("cublasSetStream_v2", "handle0", 99)
            tb, ta, m, n, k, ldb, lda, ldc = measure.gemm_args(layout, M, N, K, pitches or launch._contiguous(M, N, K))
            one, other = ctypes.c_float(alpha).value, ctypes.c_float(beta).value
            if batch == 1:
                sgemm = ("cublasSgemm_v2", "handle0", tb, ta, m, n, k, one, 20, ldb, 10, lda, other, 30, ldc)
            else:
                sa, sb, sc = strides or (M * K, K * N, M * N)
                sgemm = ("cublasSgemmStridedBatched", "handle0", tb, ta, m, n, k, one, 20, ldb, sb, 10, lda, sa)
                sgemm += (other, 30, ldc, sc, batch)
            assert calls[1:] == [sgemm]
            bound_some += 1
    assert bound_some > 50


@pytest.mark.parametrize(("value", "count"), [(None, 1), ("", 1), ("0", 0), ("1", 1), ("8", 8)])
def test_the_number_of_kernels_timed_comes_from_the_environment(monkeypatch, value, count):
    if value is None:
        monkeypatch.delenv(measure.ENV, raising=False)
    else:
        monkeypatch.setenv(measure.ENV, value)
    assert measure.kernels_to_time() == count


@pytest.mark.parametrize("value", ["9", "-1", "three", "2.0", " 3", "\u0663", "1" * 400])
def test_a_bad_number_of_kernels_is_one_line_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(measure.ENV, value)
    with pytest.raises(UserError, match=measure.ENV) as err:
        measure.kernels_to_time()
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


class _Fake:
    """A kernel whose launch says who ran; `times` gives its ms (None: it raises)."""

    def __init__(self, name, log, layout="nn"):
        self.config = SimpleNamespace(name=name)
        self.source, self.layout, self.precision, self.batched, self.family = name, layout, "highest", False, None
        self.routed = False
        self._kernel = SimpleNamespace(launch=lambda *args: log.append((name, args)))

    def _launch(self, ops, alpha, beta):
        return ops.result


def _ops(beta_target="C"):
    return SimpleNamespace(
        M=64, N=48, K=32, a="A", b="B", c=beta_target, stream=SimpleNamespace(is_capturing=lambda: False),
        pitches=(32, 48, 48), batch=1, strides=None, layout="nn", result="out", device=0,
    )  # fmt: skip


def _timer(log, times):
    def timer(run, stream):
        run()
        name = log[-1][0]
        if times[name] is None:
            raise RuntimeError(f"{name} refused")
        return times[name]

    return timer


def test_the_fastest_contender_is_kept_and_timed_on_the_calls_own_c_with_beta_zero():
    log = []
    kernels = [_Fake(n, log) for n in ("pick", "second", "third")]
    got, times = measure.fastest(kernels, _ops(), 2.0, 0.0, _timer(log, {"pick": 5.0, "second": 3.0, "third": 4.0}))
    assert got is kernels[1] and times == [5.0, 3.0, 4.0]
    assert {args[6:8] for _, args in log} == {(2.0, 0.0)} and {args[5] for _, args in log} == {"C"}
    assert len(log) == measure.ROUNDS * 3  # each contender in each round


def test_contenders_slower_than_long_ms_are_timed_in_one_round():
    log = []
    kernels = [_Fake(n, log) for n in ("pick", "cublas")]
    slow = measure.LONG_MS * 2
    got, _ = measure.fastest(kernels, _ops(), 1.0, 0.0, _timer(log, {"pick": slow, "cublas": slow * 1.5}))
    assert got is kernels[0] and len(log) == 2


def test_a_contender_that_raises_is_left_out_and_the_picks_error_is_raised():
    log = []
    kernels = [_Fake(n, log) for n in ("pick", "cublas")]
    got, times = measure.fastest(kernels, _ops(), 1.0, 0.0, _timer(log, {"pick": 5.0, "cublas": None}))
    assert got is kernels[0] and times[1] == float("inf")
    assert sum(name == "cublas" for name, _ in log) == 1  # not tried again after it raised
    with pytest.raises(RuntimeError, match="pick refused"):
        measure.fastest(kernels, _ops(), 1.0, 0.0, _timer(log, {"pick": None, "cublas": 1.0}))


@pytest.fixture
def settled(monkeypatch):
    """api._settled with fake kernels: the model's pick, two more likeliest configs, and cuBLAS."""
    log, made = [], {}
    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    monkeypatch.setattr(api, "_device_props", lambda dev: (SLUG, "sm_90"))
    monkeypatch.setattr(api, "_device_limits", lambda dev, arch: None)
    monkeypatch.setattr(api, "_choose", lambda dev, problem: made.setdefault("pick", _Fake("pick", log)))

    def kernel(cfg, dev, arch, source):
        return made.setdefault(cfg.name, _Fake(cfg.name, log))

    monkeypatch.setattr(api, "_kernel", kernel)
    likeliest = [SimpleNamespace(name=n) for n in ("pick", "second", "third", "fourth")]
    monkeypatch.setattr(dispatch_table._Table, "likeliest", lambda self, p, limits, count: likeliest[:count])
    monkeypatch.setattr(measure.CublasKernel, "__init__", lambda self, k, note="": _Fake.__init__(self, "cublas", log))
    times = {"pick": 5.0, "second": 4.0, "third": 3.0, "fourth": 1.0, "cublas": 2.0}
    monkeypatch.setattr(measure, "_event_ms", _timer(log, times))
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(RESULTS))
    return SimpleNamespace(log=log, times=times)


def test_a_new_shapes_first_call_times_the_likeliest_and_cublas_then_keeps_the_winner(settled, monkeypatch):
    monkeypatch.setenv(measure.ENV, "3")
    p = Problem(64, 48, 32)
    got, settled_now = api._settled(_ops(), p, 1.0, 0.0)
    assert settled_now
    timed = {name for name, _ in settled.log}
    assert timed == {"pick", "second", "third", "cublas"}  # three of the model's, not the fourth
    assert got.config.name == "cublas"
    settled.log.clear()
    assert api._settled(_ops(), p, 1.0, 0.0) == (got, True) and not settled.log  # a lookup after
    settled.times["third"] = 1.0
    assert api._settled(_ops(), Problem(64, 48, 33), 1.0, 0.0)[0].config.name == "third"


def test_a_captured_call_runs_the_models_pick_untimed_and_the_next_call_times(settled, monkeypatch):
    monkeypatch.setenv(measure.ENV, "1")
    ops = _ops()
    ops.stream = SimpleNamespace(is_capturing=lambda: True)
    p = Problem(64, 48, 32)
    got, settled_now = api._settled(ops, p, 1.0, 0.0)
    assert got.config.name == "pick" and not settled_now and not settled.log
    assert api._settled(_ops(), p, 1.0, 0.0)[0].config.name == "cublas"


def test_by_default_the_models_pick_meets_cublas_alone_and_zero_runs_it_untimed(settled, monkeypatch):
    monkeypatch.delenv(measure.ENV, raising=False)
    assert api._settled(_ops(), Problem(64, 48, 31), 1.0, 0.0)[0].config.name == "cublas"
    assert {name for name, _ in settled.log} == {"pick", "cublas"}
    settled.log.clear()
    monkeypatch.setenv(measure.ENV, "0")
    assert api._settled(_ops(), Problem(64, 48, 32), 1.0, 0.0)[0].config.name == "pick" and not settled.log


def test_the_likeliest_configs_are_distinct_the_models_pick_first_and_none_for_a_tuned_shape():
    table = dispatch_table.table_for(RESULTS, SLUG)
    for shape in (Problem(1000, 777, 300), Problem(77, 5000, 64, "nt"), Problem(300, 300, 300, "tt", 4)):
        got = table.likeliest(shape, None, 3)
        assert 1 <= len(got) <= 3 and len({c.name for c in got}) == len(got)
        assert got[0] == table.choose(shape, None)[2]
        assert table.likeliest(shape, None, 0) == []
    tuned = table.records[0][0]
    assert table.choose(tuned, None)[3] is None and table.likeliest(tuned, None, 3) == []


def test_no_room_to_time_leaves_the_models_pick_settled(settled, monkeypatch):
    monkeypatch.setenv(measure.ENV, "1")

    def full(*args):
        raise MemoryError("out of memory allocating the scratch C")

    monkeypatch.setattr(measure, "fastest", full)
    assert api._settled(_ops(), Problem(64, 48, 30), 1.0, 0.5) == (api._choose(0, None), True)
