"""The Ozaki route's per-call check on the device: kernels/ozaki_guard.py's verdict for CuPy arrays.

The norms come from the scaling's own sum-of-squares and exponent kernels, the sampled elements'
sums from one kernel (templates/_ozaki_guard.cu.j2), and the verdict from the host's few hundred
numbers: two copies to the host and one to the device a call, where the same check in CuPy array
operations took some forty launches and ran 5-6 ms at 4096^3 on an H200. Both kernels keep FP32
subnormals, which CuPy's own kernels flush (they compile with -ftz=true): subnormal inputs count.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from ..kernels.ozaki_choice import MAX_MODULI
from ..kernels.ozaki_guard import GUARD_COUNTS, GUARD_KERNEL, GUARD_THREADS, Verdict, guard_source
from ..kernels.ozaki_guard import admit as host_admit
from ..kernels.ozaki_passes import SCALE_KERNEL, scale_source
from .ozaki import _module, _vectors, exponent_pass


class DeviceGuard:
    """The check's kernels, loaded on the current device.

    Args:
        arch: the target, e.g. "sm_90"; the current device's by default.
    """

    def __init__(self, arch: str | None = None):
        arch = arch or f"sm_{cp.cuda.Device().compute_capability}"
        # Any count's scaling source: its norms do not depend on the count (only its exponents do).
        scale = _module(scale_source(MAX_MODULI), f"{SCALE_KERNEL}_exp", arch)
        self._sq, self._exp = (scale.get_function(f"{SCALE_KERNEL}_{k}") for k in ("sq", "exp"))
        self._stats = _module(guard_source(), GUARD_KERNEL, arch).get_function(GUARD_KERNEL)
        self._sms = cp.cuda.Device().attributes["MultiProcessorCount"]

    def norms(self, x: cp.ndarray, axis: int, out: cp.ndarray | None = None) -> cp.ndarray:
        """Return the 2-norms (float64) of `x`'s vectors along `axis` (0: its rows, 1: its columns).

        Args:
            out: contiguous float64, one a vector, written where given.
        """
        out = cp.empty(_vectors(x, axis)[0], cp.float64) if out is None else out
        exponent_pass(self._sq, self._exp, self._sms, x, axis, out)
        return out

    def stats(self, a: cp.ndarray, b: cp.ndarray):
        """Return the device's form of ozaki_guard.sample_stats for op(A) `a` and op(B) `b`."""
        _, k, sam, sak = _vectors(a, 0)
        _, kb, sbn, sbk = _vectors(b, 1)
        if k != kb:
            raise ValueError(f"op(A) has K = {k}, op(B) {kb}")

        def run(rows: np.ndarray, cols: np.ndarray, e: np.ndarray, f: np.ndarray) -> np.ndarray:
            p, parts = len(rows), []
            for q0 in range(0, max(len(e), 1), GUARD_COUNTS):  # each launch its counts' sums
                eq, fq = e[q0 : q0 + GUARD_COUNTS], f[q0 : q0 + GUARD_COUNTS]
                idx = cp.asarray(np.concatenate([rows, cols, eq.ravel(), fq.ravel()]).astype(np.int32))
                d = cp.empty((3 + 3 * len(eq), p), cp.float64)
                args = (np.int32(p), np.int32(k), np.int32(len(eq)), a, np.int64(sam), np.int64(sak))
                self._stats((p, 1, 1), (GUARD_THREADS, 1, 1), (*args, b, np.int64(sbk), np.int64(sbn), idx, d))
                parts.append(d if q0 == 0 else d[3:])
            return (parts[0] if len(parts) == 1 else cp.concatenate(parts)).get()

        return run

    def admit(self, a: cp.ndarray, b: cp.ndarray, max_moduli: int = MAX_MODULI, seed: int = 0, norms=None) -> Verdict:
        """Return ozaki_guard.admit's verdict for op(A) `a` (M x K) and op(B) `b` (K x N).

        Args:
            a, b: float32 CuPy arrays, any non-negative strides (a transpose's view included).
            max_moduli, seed: as admit's.
            norms: (A's row norms, B's column norms) where the scaling pass has them; made here
                (one pass over each operand) when None.
        Returns:
            Verdict, the one NumPy's admit gives for the same operands (to the norms' last bits).

        Example:
            DeviceGuard().admit(cp.asarray(a), cp.asarray(b)).moduli  # 7 for uniform inputs
        """
        m, n = int(a.shape[0]), int(b.shape[1])
        if norms is None:
            both = cp.empty(m + n, cp.float64)
            self.norms(a, 0, both[:m])
            self.norms(b, 1, both[m:])
            host = both.get()
            norms = (host[:m], host[m:])
        else:
            norms = tuple(x.get() if isinstance(x, cp.ndarray) else np.asarray(x) for x in norms)
        return host_admit(a, b, max_moduli, seed, norms=norms, stats=self.stats(a, b))


_GUARDS: dict[int, DeviceGuard] = {}


def admit(a: cp.ndarray, b: cp.ndarray, max_moduli: int = MAX_MODULI, seed: int = 0, norms=None) -> Verdict:
    """Return the check's verdict on the current device (DeviceGuard.admit, loaded once a device).

    Example:
        admit(cp.asarray(a), cp.asarray(b), max_moduli=12)
    """
    dev = cp.cuda.Device().id
    if dev not in _GUARDS:
        _GUARDS[dev] = DeviceGuard()
    return _GUARDS[dev].admit(a, b, max_moduli, seed, norms)
