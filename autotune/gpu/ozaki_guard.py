"""The Ozaki route's per-call check on the device: kernels/ozaki_guard.py's verdict for CuPy arrays.

The norms come from the scaling's own sum-of-squares and exponent kernels; then three kernels
(templates/_ozaki_guard.cu.j2) pick the sample and its exponents, sum it, and judge every count,
and one copy of three numbers brings the verdict to the host. The same check in CuPy array
operations took some forty launches and 5-6 ms at 4096^3 on an H200, and its judgement on the host
another 0.5 ms of NumPy. The kernels keep FP32 subnormals, which CuPy's own flush (-ftz=true).
"""

from __future__ import annotations

import math

import cupy as cp
import numpy as np

from ..core.tiers import tier
from ..kernels.ozaki import norm_bits
from ..kernels.ozaki_choice import MAX_MODULI, OTHER
from ..kernels.ozaki_guard import (
    ADVANTAGE,
    ELEMENT_MARGIN,
    GUARD_COUNTS,
    GUARD_KERNEL,
    GUARD_THREADS,
    RATIO,
    SAMPLES,
    TOP,
    Verdict,
    admissible,
    guard_source,
    measured_advantage,
    random_pairs,
)
from .compile import compile_source
from .ozaki import Stats, _vectors, exponent_pass, stats_pass


class DeviceGuard:
    """The check's kernels, loaded on the current device.

    Args:
        arch: the target, e.g. "sm_90"; the current device's by default.
    """

    def __init__(self, arch: str | None = None):
        arch = arch or f"sm_{cp.cuda.Device().compute_capability}"
        # Any count's scaling pass: its norms do not depend on the count (only its exponents do).
        self._sq, self._exp = stats_pass(arch)
        # No contracted multiply-adds: the judge rounds as NumPy's form does, so both give one verdict.
        mod = cp.cuda.function.Module()
        mod.load(compile_source(guard_source(), arch, f"{GUARD_KERNEL}_judge", ("--fmad=false",)).cubin)
        self._stats, self._pick, self._judge = (mod.get_function(GUARD_KERNEL + x) for x in ("", "_pick", "_judge"))
        self._sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self._random: dict[tuple[int, int, int], cp.ndarray] = {}
        self._heads: dict[tuple[int, ...], cp.ndarray] = {}

    def norms(self, x: cp.ndarray, axis: int, out: cp.ndarray | None = None, stats: Stats | None = None) -> cp.ndarray:
        """Return the 2-norms (float64) of `x`'s vectors along `axis` (0: its rows, 1: its columns).

        Args:
            out: contiguous float64, one a vector, written where given.
            stats: the vectors' 1-norms and largest magnitudes (gpu/ozaki.Stats), written where
                given: the elementwise guarantee's, from the same loads.
        """
        out = cp.empty(_vectors(x, axis)[0], cp.float64) if out is None else out
        exponent_pass(self._sq, self._exp, self._sms, x, axis, out, stats)
        return out

    def _launch_stats(self, a, b, idx: cp.ndarray, out: cp.ndarray, p: int, q: int) -> None:
        """Launch the sums' kernel over `q` counts (GUARD_COUNTS a block), idx in its layout."""
        _, k, sam, sak = _vectors(a, 0)
        _, kb, sbn, sbk = _vectors(b, 1)
        if k != kb:
            raise ValueError(f"op(A) has K = {k}, op(B) {kb}")
        args = (np.int32(p), np.int32(k), np.int32(q), a, np.int64(sam), np.int64(sak), b, np.int64(sbk), np.int64(sbn))
        self._stats((p, max(1, -(-q // GUARD_COUNTS)), 1), (GUARD_THREADS, 1, 1), (*args, idx, out))

    def stats(self, a: cp.ndarray, b: cp.ndarray):
        """Return the device's form of ozaki_guard.sample_stats for op(A) `a` and op(B) `b`."""

        def run(rows: np.ndarray, cols: np.ndarray, e: np.ndarray, f: np.ndarray) -> np.ndarray:
            p, q = len(rows), len(e)
            idx = cp.asarray(np.concatenate([rows, cols, e.ravel(), f.ravel()]).astype(np.int32))
            out = cp.empty((3 + 3 * q, p), cp.float64)
            self._launch_stats(a, b, idx, out, p, q)
            return out.get()

        return run

    def admit(
        self, a: cp.ndarray, b: cp.ndarray, max_moduli: int = MAX_MODULI, seed: int = 0, norms=None, advantage=ADVANTAGE
    ) -> Verdict:
        """Return ozaki_guard.admit's verdict for op(A) `a` (M x K) and op(B) `b` (K x N).

        Every step on the device (the norms, the sample, its sums, the judgement of every count and
        the bisection), then one copy of three numbers to the host.

        Args:
            a, b: float32 CuPy arrays, any non-negative strides (a transpose's view included).
            max_moduli, seed, advantage: as admit's.
            norms: (A's row norms, B's column norms), M and N of them, where the scaling pass has
                them (float64 CuPy arrays: no copy); made here (one pass over each operand) when None.
        Returns:
            Verdict, the one NumPy's admit gives for the same operands (to the norms' last bits).

        Example:
            DeviceGuard().admit(cp.asarray(a), cp.asarray(b)).moduli  # 7 for uniform inputs
        """
        return self.launch(a, b, max_moduli, seed, norms, advantage).verdict()

    def launch(
        self, a: cp.ndarray, b: cp.ndarray, max_moduli: int = MAX_MODULI, seed: int = 0, norms=None, advantage=ADVANTAGE
    ) -> Pending:
        """Enqueue `admit`'s work on the current stream and return its verdict to come.

        The host goes on (a route enqueues its residues and GEMMs meanwhile) until it asks the
        Pending for the verdict. Arguments as admit's.
        """
        (m, k), n = a.shape, int(b.shape[1])
        if b.shape[0] != k:
            raise ValueError(f"op(A) has K = {k}, op(B) {b.shape[0]}")
        counts = admissible(max_moduli, k)
        if not counts:
            return Pending(Verdict(OTHER, None, math.inf, math.inf))
        if m == 0 or n == 0:  # C is empty
            return Pending(Verdict("ozaki-int8", counts[0], 0.0, 0.0))
        if norms is None:
            na, nb = self.norms(a, 0), self.norms(b, 1)
        else:  # the pick kernel reads M and N of them: a shorter array would be read past its end
            na, nb = (cp.ascontiguousarray(cp.asarray(x), cp.float64) for x in norms)
            if na.shape != (m,) or nb.shape != (n,):
                raise ValueError(f"norms {na.shape} and {nb.shape} for op(A) {a.shape} and op(B) {b.shape}")
        q, p = len(counts), TOP * TOP + SAMPLES
        head = self._counts(counts)
        idx = cp.empty(2 * p + 2 * q * p + 2 * q + 1, cp.int32)  # pick's layout, then the judge's counter
        hdr, sums = cp.empty(4, cp.float64), cp.empty((3 + 3 * q, p), cp.float64)
        shape = (np.int32(m), np.int32(n), np.int32(k), np.int32(q))
        self._pick((2, 1, 1), (GUARD_THREADS, 1, 1), (*shape, na, nb, head[q:], self._sample(m, n, seed), idx, hdr))
        self._launch_stats(a, b, idx, sums, p, q)
        out = cp.empty(3 * q + 3, cp.float64)  # the counts' ratios, then the verdict
        adv2 = np.float64(advantage) * np.float64(advantage)
        element = np.float64(tier("high").bound(k) / ELEMENT_MARGIN)
        args = (np.int32(k), np.int32(q), head[:q], idx, sums, hdr, np.float64(RATIO), adv2, element, out, out[3 * q :])
        self._judge((q, 1, 1), (GUARD_THREADS, 1, 1), args)
        # The verdict's three numbers to pinned memory, and an event the host can wait on alone.
        host = cp.cuda.alloc_pinned_memory(24)
        stream = cp.cuda.get_current_stream()
        to_host = cp.cuda.runtime.memcpyDeviceToHost
        cp.cuda.runtime.memcpyAsync(host.ptr, out.data.ptr + 8 * 3 * q, 24, to_host, stream.ptr)
        done = cp.cuda.Event(block=False, disable_timing=True)
        done.record(stream)
        return Pending(None, np.frombuffer(host, np.float64, 3), done, (out, host))

    def advantage(self, a: cp.ndarray, b: cp.ndarray, c: cp.ndarray, seed: int = 0) -> float:
        """Return measured_advantage of the SGEMM that made `c` from op(A) `a` and op(B) `b`.

        The sample's exact sums come from the check's own kernel; C is read there alone.

        Example:
            DeviceGuard().advantage(a, b, cp.matmul(a, b))  # about 1 where cuBLAS sums as one chain
        """
        norms = self.norms(a, 0).get(), self.norms(b, 1).get()

        def elements(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return c[cp.asarray(rows), cp.asarray(cols)].astype(cp.float64).get()

        return measured_advantage(a, b, elements, seed, self.stats(a, b), norms)

    def _counts(self, counts: list[int]) -> cp.ndarray:
        """Return the counts then their norm_bits on the device (int32, once a list)."""
        key = tuple(counts)
        if key not in self._heads:
            self._heads[key] = cp.asarray(np.array(counts + [norm_bits(c) for c in counts], np.int32))
        return self._heads[key]

    def _sample(self, m: int, n: int, seed: int) -> cp.ndarray:
        """Return the random elements' rows then columns on the device (int32, once a shape)."""
        key = (m, n, seed)
        if key not in self._random:
            if len(self._random) >= 256:  # a bound for programs of many shapes
                self._random.clear()
            self._random[key] = cp.asarray(np.concatenate(random_pairs(m, n, seed)).astype(np.int32))
        return self._random[key]


class Pending:
    """A verdict on its way from the device (DeviceGuard.launch): `verdict()` waits for it alone."""

    def __init__(self, ready: Verdict | None, host: np.ndarray | None = None, done=None, keep=()):
        self._ready, self._host, self._done, self._keep = ready, host, done, keep

    def verdict(self) -> Verdict:
        """Return the verdict, waiting for the check's kernels alone (not for later work)."""
        if self._ready is None:
            self._done.synchronize()
            count, normwise, median = self._host.tolist()
            if count < 0:
                self._ready = Verdict(OTHER, None, None, None)
            elif count == 0:
                self._ready = Verdict(OTHER, None, normwise, median)
            else:
                self._ready = Verdict("ozaki-int8", int(count), normwise, median)
            self._keep = ()
        return self._ready


_GUARDS: dict[int, DeviceGuard] = {}


def admit(
    a: cp.ndarray, b: cp.ndarray, max_moduli: int = MAX_MODULI, seed: int = 0, norms=None, advantage=ADVANTAGE
) -> Verdict:
    """Return the check's verdict on the current device (DeviceGuard.admit, loaded once a device).

    Example:
        admit(cp.asarray(a), cp.asarray(b), max_moduli=12)
    """
    dev = cp.cuda.Device().id
    if dev not in _GUARDS:
        _GUARDS[dev] = DeviceGuard()
    return _GUARDS[dev].admit(a, b, max_moduli, seed, norms, advantage)
