"""A new shape's first `matmul` call may time the model's pick and cuBLAS, and keep the faster.

The model (dispatch/model.py) ranks the stored configs for a shape nobody tuned; its pick was
0.67-0.85x cuBLAS's kernel time over seeded draws on the H200, the faster of it and cuBLAS
1.03-1.10x (of its three likeliest and cuBLAS 1.05-1.12x; notes/performance.md). The first call
of each (shape, layout, batch, beta, tier) times the model's N likeliest kernels ($AUTOTUNE_MEASURE,
default 1: the pick alone) and cuBLAS on the call's own operands, and the calls after it run the
winner, as cudnn.benchmark does. 0: the model's pick, untimed.
"""

from __future__ import annotations

import os
import threading

from ..core.types import UserError
from ..records.fields import shown
from .kernel import Kernel

ENV = "AUTOTUNE_MEASURE"
# The pick against cuBLAS: each kernel more is compiled and checked at a first call (seconds with a
# cold cache) for 2-3% over the draws above.
DEFAULT_KERNELS = 1
MAX_KERNELS = 8
# Each contender is timed for about BUDGET_MS (at most MAX_REPS launches) in each of ROUNDS
# interleaved rounds, its least time kept: a few ms a first call beyond its compiles.
BUDGET_MS = 1.0
LONG_MS = 10.0  # a contender slower than this times steadily: one round, one run
MAX_REPS = 20
ROUNDS = 3
_INT_MAX = 2**31 - 1  # cuBLAS's m, n, k and leading dimensions are 32-bit ints


def kernels_to_time() -> int:
    """Return how many of the model's likeliest kernels a first call times ($AUTOTUNE_MEASURE).

    Unset, "" or "1": the model's pick timed against cuBLAS. "0": none, and not cuBLAS either:
    each shape runs the model's pick.

    Raises:
        UserError: anything but a whole number 0-8.
    """
    value = os.environ.get(ENV, "")
    if value == "":
        return DEFAULT_KERNELS
    if value.isascii() and value.isdigit() and int(value) <= MAX_KERNELS:
        return int(value)
    raise UserError(f"{ENV} must be a whole number 0-{MAX_KERNELS} (kernels a first call times), not {shown(value)}")


def gemm_args(layout: str, M: int, N: int, K: int, pitches: tuple[int, int, int]) -> tuple | None:
    """Return cuBLAS's (transa, transb, m, n, k, lda, ldb, ldc) for a row-major problem, or None.

    Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS's A is B's memory, its
    B is A's. None where cuBLAS would refuse it (a leading dimension below its rows, or past int).

    Example:
        gemm_args("nt", 64, 48, 32, (32, 32, 48))  # (1, 0, 48, 64, 32, 32, 32, 48)
    """
    lda, ldb, ldc = pitches
    trans_b, trans_a = int(layout[1] == "t"), int(layout[0] == "t")
    rows_b = K if trans_b else N  # of B's memory read column-major
    rows_a = M if trans_a else K
    if ldb < max(1, rows_b) or lda < max(1, rows_a) or ldc < max(1, N):
        return None
    if max(M, N, K, lda, ldb, ldc) > _INT_MAX:
        return None
    return trans_b, trans_a, N, M, K, ldb, lda, ldc


class _Handles(threading.local):
    """One cuBLAS handle per device and thread: a handle's stream is set at each call."""

    def __init__(self):
        self.by_device: dict[int, int] = {}


_HANDLES = _Handles()
_LIB: list = []  # libcublas through ctypes, once found


def _cublas():
    """Return libcublas through ctypes: the one CuPy loaded, its scalars by pointer."""
    # Not CuPy's wrappers: their scalars are values in some versions, pointers in others.
    if not _LIB:
        import ctypes

        import cupy_backends.cuda.libs.cublas  # noqa: F401 - loads libcublas into the process
        from cupy_backends.cuda.api import runtime

        try:
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps if "/libcublas.so" in line})
        except OSError:
            paths = []
        # Else by its soname, which the loader matches to the one loaded (an OSError: no cuBLAS contender).
        lib = ctypes.CDLL(paths[0] if paths else f"libcublas.so.{runtime.runtimeGetVersion() // 1000}")
        p, i, f, ll = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_longlong
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(p)]
        lib.cublasSetStream_v2.argtypes = [p, p]
        lib.cublasSetMathMode.argtypes = [p, i]
        lib.cublasSgemm_v2.argtypes = [p, i, i, i, i, i, f, p, i, p, i, f, p, i]
        lib.cublasSgemmStridedBatched.argtypes = [p, i, i, i, i, i, f, p, i, ll, p, i, ll, f, p, i, ll, i]
        _LIB.append(lib)
    return _LIB[0]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS {what} returned status {status}")


def _handle(dev: int):
    handle = _HANDLES.by_device.get(dev)
    if handle is None:
        import ctypes

        lib = _cublas()
        h = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(h)), "create")
        # The default math mode: strict FP32, whatever CuPy's own handle (CUPY_TF32) is set to.
        _check(lib.cublasSetMathMode(h, 0), "setMathMode")
        handle = _HANDLES.by_device[dev] = h
    return handle


class CublasLaunch:
    """cuBLAS's SGEMM behind a loaded kernel's `launch`; a call it would refuse goes to `fallback`.

    Args:
        layout: the layout it reads ("nn", "nt", "tn", "tt").
        fallback: a loaded kernel's launch (gpu/launcher.LoadedKernel.launch) built for that layout.
    """

    def __init__(self, layout: str, fallback):
        self.layout, self.fallback = layout, fallback

    def launch(self, M, N, K, a, b, c, alpha=1.0, beta=0.0, stream=None, pitches=None, batch=1, strides=None):
        """Compute C = alpha * op(A) @ op(B) + beta * C as LoadedKernel.launch does, by cuBLAS."""
        if pitches is None:
            pitches = self._contiguous(M, N, K)
        run = self.bind(M, N, K, pitches, batch, strides)
        if run is None:
            return self.fallback(M, N, K, a, b, c, alpha, beta, stream, pitches, batch, strides)
        _, address, current, _, _ = _pieces()
        run(address(a), address(b), address(c), alpha, beta, stream if stream is not None else current())

    def _contiguous(self, M, N, K) -> tuple[int, int, int]:
        """Return (lda, ldb, ldc) of contiguous operands in this layout."""
        return (M if self.layout[0] == "t" else K, K if self.layout[1] == "t" else N, N)

    def bind(self, M, N, K, pitches, batch=1, strides=None):
        """Return run(a, b, c, alpha, beta, stream) of this shape, as `launch` runs it, or None.

        For matmul's short road (dispatch/shortcut.py): cuBLAS's arguments are worked out once, not
        at each call. Args as `launch`'s; a, b and c are then addresses, the stream a CuPy stream.
        None where `launch` would call the fallback.
        """
        if pitches is None:
            pitches = self._contiguous(M, N, K)
        args = gemm_args(self.layout, M, N, K, pitches) if min(M, N, K) > 0 and batch <= _INT_MAX else None
        if args is None:
            return None
        tb, ta, m, n, k, ldb, lda, ldc = args
        c_float, _, _, device, lib = _pieces()
        set_stream = lib.cublasSetStream_v2
        if batch == 1:
            sgemm = lib.cublasSgemm_v2

            def run(a, b, c, alpha, beta, stream):
                handle = _handle(device())
                _check(set_stream(handle, stream.ptr), "setStream")
                _check(sgemm(handle, tb, ta, m, n, k, c_float(alpha), b, ldb, a, lda, c_float(beta), c, ldc), "SGEMM")

            return run
        sa, sb, sc = strides if strides is not None else (M * K, K * N, M * N)
        batched = lib.cublasSgemmStridedBatched

        def run_batch(a, b, c, alpha, beta, stream):
            handle = _handle(device())
            _check(set_stream(handle, stream.ptr), "setStream")
            one, other = c_float(alpha), c_float(beta)  # host scalars: read before the call returns
            _check(batched(handle, tb, ta, m, n, k, one, b, ldb, sb, a, lda, sa, other, c, ldc, sc, batch), "SGEMM")

        return run_batch


_PIECES: list = []  # what a launch uses, imported once: it is on every call's path


def _pieces() -> tuple:
    """Return (c_float, launcher._address, CuPy's current stream, the current device, libcublas)."""
    if not _PIECES:
        import ctypes

        import cupy as cp
        from cupy_backends.cuda.api import runtime

        from ..gpu.launcher import _address

        _PIECES.append((ctypes.c_float, _address, cp.cuda.get_current_stream, runtime.getDevice, _cublas()))
    return _PIECES[0]


class CublasKernel:
    """cuBLAS, called as a dispatch Kernel is, where a first call timed it fastest.

    Args:
        kernel: the model's pick for the shape (a dispatch Kernel): what it stands in for, and what
            runs a call cuBLAS would refuse.
        note: what chose it, shown in its repr.
    """

    routed = False  # one launch: matmul keeps a shortcut of it

    def __init__(self, kernel, note: str = ""):
        self.kernel = kernel
        self.config, self.layout, self.precision = kernel.config, kernel.layout, kernel.precision
        self.batched, self.family = kernel.batched, kernel.family
        self.source = f"cuBLAS{note}, else {kernel.config.name}"
        self._kernel = CublasLaunch(kernel.layout, kernel._kernel.launch)

    def __repr__(self) -> str:
        return f"<autotune.CublasKernel ({self.source})>"

    __call__ = Kernel.__call__  # the same placement; then this class's _launch

    def _launch(self, ops, alpha: float, beta: float):
        self._kernel.launch(
            ops.M, ops.N, ops.K, ops.a, ops.b, ops.c, alpha, beta, ops.stream, ops.pitches, ops.batch, ops.strides
        )
        return ops.finish()


def fastest(contenders: list, ops, alpha: float, beta: float, timer=None) -> tuple[object, list[float]]:
    """Return (the contender that ran the call's operands fastest, each one's time in ms).

    Each is timed on `ops` (a dispatch.arrays.Operands) with beta 0 into C itself when the call's
    beta is 0 (C is then only written, and the winner writes it last), else into a scratch C.
    Another contender that raises is left out (its time inf); the first's error is raised.

    Args:
        contenders: kernels with a loaded launch (`_kernel.launch`), the model's pick first.
        timer: (run, stream) -> ms a run, for tests; by default CUDA events on the call's stream.
    """
    timer = timer or _event_ms
    c, pitches, strides = ops.c, ops.pitches, ops.strides
    if beta != 0:
        import cupy as cp

        with ops.stream:
            c = cp.empty((ops.batch, ops.M, ops.N) if ops.batch > 1 else (ops.M, ops.N), dtype=cp.float32)
        pitches = (*ops.pitches[:2], ops.N)
        strides = None if ops.strides is None else (*ops.strides[:2], ops.M * ops.N)

    def run_of(kernel):
        launch = kernel._kernel.launch
        return lambda: launch(ops.M, ops.N, ops.K, ops.a, ops.b, c, alpha, 0.0, ops.stream, pitches, ops.batch, strides)

    runs = [run_of(k) for k in contenders]
    times = [float("inf")] * len(contenders)
    refused = set()
    for round_ in range(ROUNDS):
        if round_ and min(times) > LONG_MS:
            break
        for i, run in enumerate(runs):
            if i in refused:
                continue
            try:
                times[i] = min(times[i], timer(run, ops.stream))
            except Exception:  # a contender cuBLAS or the driver refuses is not chosen
                if not i:
                    raise  # the model's pick runs the call whatever the others do
                refused.add(i)
                times[i] = float("inf")
    best = min(range(len(contenders)), key=lambda i: times[i])
    return contenders[best], times


def _event_ms(run, stream) -> float:
    """Return the ms of one `run()` on `stream` by CUDA events (a warm-up, then BUDGET_MS)."""
    import cupy as cp

    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    run()  # cuBLAS's first call of a shape picks its algorithm
    e0.record(stream)
    run()
    e1.record(stream)
    e1.synchronize()
    once = cp.cuda.get_elapsed_time(e0, e1)
    if once >= LONG_MS:
        return once
    reps = int(min(MAX_REPS, max(1, BUDGET_MS / max(once, 1e-3))))
    e0.record(stream)
    for _ in range(reps):
        run()
    e1.record(stream)
    e1.synchronize()
    return min(once, cp.cuda.get_elapsed_time(e0, e1) / reps)


def capturing(stream) -> bool:
    """Return whether `stream` (CuPy's) is being captured into a CUDA graph: no timing then."""
    from ..gpu.launcher import capturing  # the one test, where CuPy is loaded already

    return capturing(stream)
