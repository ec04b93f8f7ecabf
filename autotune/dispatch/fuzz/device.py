"""Fuzz cases (`Case`) run on the device, each result checked element by element against FP64.

Every operand lies inside a larger buffer of NaN, so a kernel that reads a row's padding or past
an offset view shows it as NaN in C (`_operand`, `_output`); what is checked is `_check`'s.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import warnings

import cupy as cp
import numpy as np
from cupy_backends.cuda.api import driver, runtime

from ...core.types import Problem
from ...gpu import launcher
from .. import api, routes
from .case import Case, bound_factor

_FATAL = (driver.CUDADriverError, runtime.CUDARuntimeError)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A case's verdict: right or not, its error over the bound, why, and whether CUDA is gone."""

    ok: bool
    ratio: float = 0.0  # the largest |C - C64| over its bound (0 for an exact or non-finite result)
    reason: str = ""
    fatal: bool = False  # the CUDA context is gone: nothing more can run in this process


class _Prepared:
    """One case's arrays and what the check needs of them."""

    __slots__ = ("a", "a_buf", "a_copy", "b", "b_buf", "b_copy", "c0", "c_buf", "c_copy", "c_view", "call", "case")


class Executor:
    """Run cases in order on the current device, a stream pair's two cases at once.

    A stream-1 case and the stream-2 case after it are launched together, each on its own stream.

    Args:
        matmul: what a case without a config calls; autotune.matmul unless given (a test's own).
        load: what loads a case's config; autotune.load unless given.
    """

    def __init__(self, matmul=None, load=None):
        self.matmul = matmul or api.matmul
        self.load = load or api.load
        self.streams = {0: None, 1: cp.cuda.Stream(non_blocking=True), 2: cp.cuda.Stream(non_blocking=True)}
        self.kernels: dict[str, object] = {}
        # Host seconds in each phase (the calls' host time is the dispatch's; the device's work
        # lands where the check waits for it).
        self.seconds = {"prepare": 0.0, "call": 0.0, "check": 0.0}
        try:
            import torch

            self.torch = torch if torch.cuda.is_available() else None
        except ImportError:
            self.torch = None

    def run(self, cases: list[Case]):
        """Yield (case, Outcome) for each case, in order."""
        i = 0
        while i < len(cases):
            group = [cases[i]]
            if cases[i].stream == 1 and i + 1 < len(cases) and cases[i + 1].stream == 2:
                group.append(cases[i + 1])
            i += len(group)
            yield from zip(group, self._run_group(group), strict=True)

    def reset(self) -> None:
        """Make fresh state for a shrink: no workspace kept from earlier calls."""
        cp.cuda.Device().synchronize()
        launcher.WORKSPACES.clear()

    def _run_group(self, group: list[Case]) -> list[Outcome]:
        """Prepare, call and check a case, or a stream pair of them, and time each phase."""
        prepared, outcomes = [], [None] * len(group)
        t0 = time.perf_counter()
        try:
            for case in group:
                with self._stream(case):
                    prepared.append(self._prepare(case))
            t1 = time.perf_counter()
            for j, p in enumerate(prepared):
                with self._stream(p.case), warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    try:
                        p.c_view = self._call(p)
                    except _FATAL:
                        raise
                    except Exception as exc:  # noqa: BLE001 - any exception on valid input is a failure
                        outcomes[j] = Outcome(False, math.inf, f"raised {type(exc).__name__}: {_line(exc)}")
                # A right answer from the fallback is still a wrong choice: the dispatch chose a
                # kernel that cannot run here.
                fell_back = [w for w in said if "autotune:" in str(w.message)]
                if fell_back and outcomes[j] is None:
                    outcomes[j] = Outcome(False, math.inf, _line(fell_back[0].message))
            t2 = time.perf_counter()
            for j, p in enumerate(prepared):
                if outcomes[j] is None:
                    with self._stream(p.case):
                        outcomes[j] = _check(p)
            for s in self.streams.values():
                if s is not None:
                    s.synchronize()
            for phase, seconds in zip(self.seconds, (t1 - t0, t2 - t1, time.perf_counter() - t2), strict=True):
                self.seconds[phase] += seconds
        except _FATAL as exc:
            return [Outcome(False, math.inf, f"CUDA error: {_line(exc)}", fatal=not _alive()) for _ in group]
        return outcomes

    def _stream(self, case: Case):
        """Return the stream the case runs on (stream 0: CuPy's current one)."""
        s = self.streams[case.stream]
        return s if s is not None else cp.cuda.get_current_stream()

    def _prepare(self, case: Case) -> _Prepared:
        """Make the case's arrays from its seed, and keep what the check compares with."""
        p = _Prepared()
        p.case = case
        rng = _Random(case.seed)
        ta, tb = (t == "t" for t in case.layout)
        p.a, p.a_buf = _operand(rng, case, case.lead_a, case.M, case.K, ta, 0)
        p.b, p.b_buf = _operand(rng, case, case.lead_b, case.K, case.N, tb, 1)
        p.a_copy, p.b_copy = p.a_buf.copy(), p.b_buf.copy()
        p.c_buf, c_view = _output(case)
        if case.beta != 0:
            c_view[...] = _values(rng, case, c_view.shape)
            _specials(rng, case, c_view)
        p.c0 = c_view.astype(cp.float64) if case.beta != 0 else None
        p.c_copy = p.c_buf.copy()
        p.call = (p.a, p.b, c_view if case.out else None, (ta, tb))
        return p

    def _call(self, p: _Prepared):
        """Make the case's call (matmul, or its stored kernel) and return C as a CuPy array."""
        case = p.case
        a, b, out, (ta, tb) = p.call
        flags = {}
        if case.flags:  # the stored matrices with trans flags, where the view would be their transpose
            a, b = (a.swapaxes(-1, -2) if ta else a), (b.swapaxes(-1, -2) if tb else b)
            flags = {"trans_a": ta, "trans_b": tb}
        if case.kind == "torch" and self.torch is not None:
            a, b = self.torch.from_dlpack(a), self.torch.from_dlpack(b)
            out = None if out is None else self.torch.from_dlpack(out)
        if case.config is None:
            # Half of them made again: the short road's (shortcut.py). C restored before a second
            # call that reads it (CuPy's stream: not a torch call's, which is made once).
            again = case.seed % 2 and (out is None or case.beta == 0 or case.kind != "torch")
            kept = p.call[2].copy() if again and out is not None and case.beta != 0 else None
            result = self.matmul(a, b, out, case.alpha, case.beta, precision=case.precision, **flags)
            if again:
                if kept is not None:
                    p.call[2][...] = kept
                result = self.matmul(a, b, out, case.alpha, case.beta, precision=case.precision, **flags)
        else:
            result = self._kernel(case.kernel)(a, b, out, case.alpha, case.beta, **flags)
        if out is not None:
            return p.call[2]
        if self.torch is not None and isinstance(result, self.torch.Tensor):
            result = cp.from_dlpack(result)
        return result

    def _kernel(self, config):
        """Return the kernel of a config, loaded once per Executor."""
        kernel = self.kernels.get(config.name)
        if kernel is None:
            kernel = self.kernels[config.name] = self.load(config=config)
        return kernel


def routed_matmul(A, B, out=None, alpha=1.0, beta=0.0, *, trans_a=False, trans_b=False, precision="highest"):
    """Return autotune.matmul's C, each `high` call of one matrix on the Ozaki route (fuzz --route).

    Whatever the records say; its check takes cuBLAS for one FP32 chain (advantage 1), the least
    a search may record, so that it admits the fewest moduli any record can lead to.
    """
    if precision != "high":
        return api.matmul(A, B, out, alpha, beta, trans_a=trans_a, trans_b=trans_b, precision=precision)
    ops = api.gpu_arrays().prepare(A, B, out, beta, trans_a, trans_b)
    kernel = api._choose(ops.device, Problem(ops.M, ops.N, ops.K, ops.layout, ops.batch, beta, precision))
    if not getattr(kernel, "routed", False):
        kernel = routes.Routed(kernel, 1.0, ops.device, " (fuzz --route)")
    return kernel._launch(ops, alpha, beta)


def _alive() -> bool:
    """Return whether the CUDA context still works after an error."""
    # A launch refused for its configuration leaves it usable; a fault in a kernel does not.
    try:
        cp.cuda.Device().synchronize()
        return float(cp.ones(4, cp.float32).sum()) == 4.0
    except _FATAL:
        return False


def _line(exc) -> str:
    """Return the first line of an error's text, cut at 300 characters."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


class _Random:
    """A case's random numbers: arrays from the device's generator, scalars from Python's."""

    def __init__(self, seed: int):
        # The device's generator is curand's Philox, whose set-up costs nothing (cupy.random
        # .default_rng's XORWOW states took most of a small case's time); the few scalars say
        # where NaNs go.
        try:
            from cupy.cuda import curand

            self.arrays = cp.random.RandomState(seed, method=curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
        except (ImportError, AttributeError, TypeError):  # NumPy in CuPy's place (the CPU tests)
            self.arrays = cp.random.RandomState(seed)
        self.scalars = random.Random(seed)

    def uniform(self, shape) -> cp.ndarray:
        """Return uniform floats in [0, 1)."""
        return self.arrays.random_sample(shape).astype(cp.float32)

    def normal(self, shape) -> cp.ndarray:
        return self.arrays.standard_normal(shape).astype(cp.float32)

    def integers(self, low: int, high: int, shape) -> cp.ndarray:
        """Return integers in [low, high]."""
        return self.arrays.randint(low, high + 1, shape)


def _values(rng: _Random, case: Case, shape) -> cp.ndarray:
    """Return FP32 data of the case's kind (uniform, normal, wide, positive or small integers)."""
    # Integers are small enough that every product and partial sum of K of them is exact in FP32,
    # and every value exact in TF32.
    if case.data == "uniform":
        x = rng.uniform(shape) * 2 - 1
    elif case.data == "normal":
        x = rng.normal(shape)
    elif case.data == "wide":
        sign = cp.where(rng.uniform(shape) < 0.5, -1.0, 1.0)
        x = sign * cp.exp2(rng.uniform(shape).astype(cp.float64) * 40 - 20)
    elif case.data == "positive":
        x = rng.uniform(shape)
    else:
        r = 4 if case.K <= 1 << 16 else 1
        x = rng.integers(-r, r, shape)
    return x.astype(cp.float32)


def _specials(rng: _Random, case: Case, x: cp.ndarray) -> None:
    """Put a few NaNs or infinities (of either sign) at random places of `x`."""
    if not case.special or x.size == 0:
        return
    pick = rng.scalars
    for _ in range(pick.randint(1, 3)):
        idx = tuple(pick.randrange(n) for n in x.shape)
        x[idx] = np.nan if case.special == "nan" else (np.inf if pick.random() < 0.5 else -np.inf)


def _operand(rng, case: Case, lead, rows: int, cols: int, stored_t: bool, which: int):
    """Return (op(X), its buffer): rows x cols (each matrix of `lead`) inside a NaN buffer.

    Stored row-major or, with `stored_t`, as its transpose, with `pads[which]` floats past each
    stored row and the first element `offsets[which]` in.
    """
    srows, scols = (cols, rows) if stored_t else (rows, cols)
    pad, off = case.pads[which], case.offsets[which]
    buf = cp.full((*lead, srows, scols + pad + off), cp.nan, dtype=cp.float32)
    view = buf[..., off : off + scols]
    view[...] = _values(rng, case, view.shape)
    _specials(rng, case, view)
    return (view.swapaxes(-1, -2) if stored_t else view), buf


def _output(case: Case):
    """Return (C's buffer, C as the call writes it): M x N (each matrix) inside a NaN buffer.

    Row-major or column-major, with C's padding and offset; NaN in C too (with beta = 0, C must be
    written, never read; otherwise the caller fills it).
    """
    lead, M, N = case.lead, case.M, case.N
    pad, off = case.pads[2], case.offsets[2]
    srows, scols = (N, M) if case.c_major == "col" else (M, N)
    buf = cp.full((*lead, srows, scols + pad + off), cp.nan, dtype=cp.float32)
    view = buf[..., off : off + scols]
    return buf, (view.swapaxes(-1, -2) if case.c_major == "col" else view)


def _check(p: _Prepared) -> Outcome:
    """Check a case's result element by element against the FP64 product of the same FP32 inputs.

    NaN must be exactly where IEEE arithmetic puts it, each infinity with its sign; integer data
    exact; else |C - C64| <= bound_factor(tier, K) * (|alpha| |op(A)| |op(B)| + |beta| |C0|), the
    worst-case rounding error of any order of summation (Higham's gamma_{K+2}) plus, for the
    tensor-core tiers, the products' own. C's buffer must be bit for bit the same outside C, and
    A's and B's buffers throughout.
    """
    case = p.case
    c = p.c_view
    if c.shape != (*case.lead, case.M, case.N) or c.dtype != cp.float32:
        return Outcome(False, math.inf, f"C has shape {c.shape} and dtype {c.dtype}")
    a64, b64 = p.a.astype(cp.float64), p.b.astype(cp.float64)
    ref = case.alpha * cp.matmul(a64, b64)
    if case.beta != 0:
        ref += case.beta * p.c0
    out = c.astype(cp.float64)
    err = cp.abs(out - ref)
    finite = cp.isfinite(ref)
    bad = cp.isnan(out) != cp.isnan(ref)
    bad |= cp.isinf(ref) & (out != ref)
    if case.exact:
        bad |= finite & (err != 0)
        tol = None
    else:  # the bound scales with |alpha| |A||B| + |beta| |C0| (an exact case needs none)
        scale = abs(case.alpha) * cp.matmul(cp.abs(a64), cp.abs(b64))
        if case.beta != 0:
            scale += abs(case.beta) * cp.abs(p.c0)
        tol = bound_factor(case.precision, case.K) * scale + 1e-30  # (the floor: FP32's subnormals)
        bad |= finite & ~(err <= tol)
    del a64, b64
    nbad = int(bad.sum())
    ratio = 0.0
    if tol is not None:
        within = finite & cp.isfinite(err)
        ratio = float(cp.where(within, err / tol, 0).max()) if c.size else 0.0
    if nbad:
        idx = tuple(int(i) for i in np.unravel_index(int(cp.argmax(bad)), bad.shape))
        got, want = float(out[idx]), float(ref[idx])
        bound = "exact" if tol is None else f"bound {float(tol[idx]):.3g}"
        return Outcome(False, max(ratio, 1.0) if tol is not None else math.inf,
                       f"{nbad} of {c.size} elements wrong; at {idx}: {got!r}, FP64 {want!r} ({bound})")  # fmt: skip
    # C's buffer outside C, and A's and B's buffers, bit for bit as they were.
    after = p.c_buf.copy()
    _view_of(case, after)[...] = _view_of(case, p.c_copy)
    for name, now, before in (
        ("C's buffer outside C", after, p.c_copy),
        ("A", p.a_buf, p.a_copy),
        ("B", p.b_buf, p.b_copy),
    ):
        if not bool((now.view(cp.uint32) == before.view(cp.uint32)).all()):
            return Outcome(False, ratio, f"wrote into {name}")
    return Outcome(True, ratio)


def _view_of(case: Case, buf: cp.ndarray) -> cp.ndarray:
    """Return C's place in a buffer shaped as C's."""
    off = case.offsets[2]
    scols = case.M if case.c_major == "col" else case.N
    return buf[..., off : off + scols]
