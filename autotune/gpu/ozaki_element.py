"""The Ozaki route's elementwise guarantee on the device: kernels/ozaki_element.py for CuPy arrays.

Each operand's vectors give their largest magnitude and 1-norm in the check's norms pass
(gpu/ozaki.stats_pass: the route's own, or one run here) and their QBITS-bit magnitudes in another
(templates/_ozaki_element.cu.j2); the magnitudes' product comes exactly from the INT8 engine's raw
sums over the subset of K that kernels/ozaki_element.stride leaves (one TMA-fed wgmma launch of
one plane, m = 0, on Hopper; a float64 GEMM elsewhere), and one kernel judges every element of C.
The floor does not depend on the count: a call makes it once and judges each count it runs
against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import cupy as cp
import numpy as np

from ..core.tiers import U, tier
from ..kernels.ozaki import fits
from ..kernels.ozaki_element import ELEMENT_KERNEL, ELEMENT_THREADS, QBITS, element_source, stride, subset
from ..kernels.ozaki_passes import residue_pitch
from ..kernels.ozaki_wgmma import WGMMA_ARCH
from ..kernels.ozaki_wgmma_tma import WgmmaTmaTile, tma_source
from .compile import compile_source
from .ozaki import Stats, _vectors, exponent_pass, int8_function, stats_pass, tma_products

# The raw INT32 sums are exact while K products of magnitudes below 2^QBITS cannot pass 2^31.
MAX_K = (2**31 - 1) // (2**QBITS - 1) ** 2
_RAW_KERNEL = "autotune_ozaki_element_raw"
JUDGE_ROWS = 256  # the judge's blocks down C's rows (each takes every JUDGE_ROWS-th row)


@dataclass(frozen=True)
class Floor:
    """|A||B| from below at every element, and the 1-norms the worst error takes.

    raw (int32 M x N) 2^-(sa_i + sb_j) <= sum_k |a_ik| |b_kj|; sa, sb int32; l1a, l1b: the 1-norms
    of op(A)'s rows and op(B)'s columns (float64); k: K.
    """

    raw: cp.ndarray
    sa: cp.ndarray
    sb: cp.ndarray
    l1a: cp.ndarray
    l1b: cp.ndarray
    k: int


class DeviceElement:
    """The elementwise guarantee's kernels on the current device.

    Args:
        raw: "int8" (the raw INT8 GEMM on Hopper's tensor cores) or "float64" (a DGEMM, exact too:
            sums of K products below 2^14 stay below 2^53); None is int8 on sm_90, else float64.

    Example:
        el = DeviceElement()
        floor = el.floor(a, b)
        el.holds(floor, e, f, 7)  # e, f: the route's exponents at 7 moduli
    """

    def __init__(self, raw: str | None = None):
        arch = f"sm_{cp.cuda.Device().compute_capability}"
        self.raw = raw or ("int8" if arch in ("sm_90", "sm_90a") else "float64")
        if self.raw not in ("int8", "float64"):
            raise ValueError(f"raw must be 'int8' or 'float64', not {raw!r}")
        mod = cp.cuda.function.Module()
        mod.load(compile_source(element_source(), arch, f"{ELEMENT_KERNEL}_judge", ("--fmad=false",)).cubin)
        self._q, self._judge = (mod.get_function(f"{ELEMENT_KERNEL}_{x}") for x in ("q", "judge"))
        self._arch, self._norms_pass = arch, None  # loaded on the first floor not given its stats
        self._sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        if self.raw == "int8":
            self._tile = t = WgmmaTmaTile()
            self._gemm = int8_function(tma_source(t, _RAW_KERNEL, out="int32"), _RAW_KERNEL, WGMMA_ARCH, t.smem_bytes)
            self._mods = cp.zeros(1, cp.int32)  # m = 0: the raw sums

    def floor(
        self, a: cp.ndarray, b: cp.ndarray, r: int | None = None, stats: tuple[Stats | None, Stats | None] | None = None
    ) -> Floor:
        """Return the Floor of float32 op(A) `a` (M x K) and op(B) `b` (K x N) (the current stream).

        Any non-negative strides (a transpose's view included).

        Args:
            r: the stride of the subset of K multiplied (ozaki_element.stride(K) when None).
            stats: op(A)'s rows' and op(B)'s columns' Stats where a pass made them already (the
                route's norms: DeviceGuard.norms); this makes any that is None.
        Raises:
            ValueError: shapes that do not multiply, or a subset past MAX_K with the int8 GEMM.
        """
        (m, k), (kb, n) = a.shape, b.shape
        if k != kb:
            raise ValueError(f"op(A) {a.shape} and op(B) {b.shape} do not multiply")
        r = stride(k) if r is None else int(r)
        kq = len(subset(k, r))
        if self.raw == "int8" and kq > MAX_K:
            raise ValueError(f"K = {k} ({kq} at stride {r}): the raw INT32 sums are exact to K = {MAX_K}")
        sta, stb = stats if stats is not None else (None, None)
        qa, sa, l1a = self._magnitudes(a, 0, r, kq, sta)
        qb, sb, l1b = self._magnitudes(b, 1, r, kq, stb)
        if self.raw == "int8":
            # Every element of C is written where K > 0 (the kernel's stores cover its tiles).
            raw = (cp.empty if m and n and kq else cp.zeros)((1, m, n), cp.int32)
            if m and n and kq:
                tma_products(self._gemm, self._tile, qa, qb, kq, raw, self._mods)
            raw = raw[0]
        else:
            raw = (qa[0, :, :kq].astype(cp.float64) @ qb[0, :, :kq].astype(cp.float64).T).astype(cp.int32)
        return Floor(raw, sa, sb, l1a, l1b, k)

    def failures(self, floor: Floor, e: cp.ndarray, f: cp.ndarray, n: int) -> cp.ndarray:
        """Return the count of elements the guarantee fails at `n` moduli: on the device, unread.

        Args:
            e, f: the route's exponents of op(A)'s rows and op(B)'s columns at `n` moduli (int32).
        """
        (m, nn), k = floor.raw.shape, floor.k
        bad = cp.zeros(1, cp.uint64)
        if not fits(n, k):
            bad.fill(max(1, m * nn))
            return bad
        e, f = (cp.ascontiguousarray(x, cp.int32) for x in (e, f))
        if e.shape != (m,) or f.shape != (nn,):
            raise ValueError(f"exponents {e.shape} and {f.shape} for C of {m} x {nn}")
        if m and nn:
            factor = np.float64(tier("high").bound(k) - U)
            args = (np.int32(m), np.int32(nn), floor.raw, floor.l1a, floor.l1b, floor.sa, floor.sb, e, f)
            # A warp adds its count once, after its rows: with a row a block, a call whose every
            # element fails spent 1.6 ms at 8192^3 in atomics on one counter. JUDGE_ROWS blocks
            # down C's rows still put several blocks on each SM at the sizes the route serves.
            grid = (-(-nn // ELEMENT_THREADS), min(m, JUDGE_ROWS), 1)
            self._judge(grid, (ELEMENT_THREADS, 1, 1), (*args, np.float64(k), factor, bad))
        return bad

    def holds(self, floor: Floor, e: cp.ndarray, f: cp.ndarray, n: int) -> bool:
        """Return whether `n` moduli keep every element within the tier's bound (NumPy's holds)."""
        return int(self.failures(floor, e, f, n)[0]) == 0

    def _magnitudes(
        self, x: cp.ndarray, axis: int, r: int, kq: int, stats: Stats | None = None
    ) -> tuple[cp.ndarray, cp.ndarray, cp.ndarray]:
        """Return (q, s, l1) of `x`'s vectors along `axis` (0: its rows, 1: its columns).

        q: ozaki_element.magnitudes's at the kq k's of subset(K, r), one int8 plane
        1 x V x residue_pitch(kq), K-major as the INT8 GEMM reads it (unset past kq: it reads no
        further); s int32; l1 the 1-norms over all of K (float64).
        """
        v, k, sv, sk = _vectors(x, axis)
        q, s = cp.empty((1, v, residue_pitch(kq)), cp.int8), cp.empty(v, cp.int32)
        if stats is None:
            stats = self._stats(x, axis)
        elif stats.l1.shape != (v,) or stats.top.shape != (v,):
            raise ValueError(f"stats of {stats.l1.shape} and {stats.top.shape} for {v} vectors")
        l1, top = stats
        if v == 0:
            return q, s, l1
        if k == 0:
            s.fill(QBITS - 1)  # top 0: frexp(1) = 0.5 x 2^1
            return q, s, l1
        blocks = -(-v * kq // ELEMENT_THREADS)
        kfast = np.int32(sk == 1 or sv != 1)
        sizes = (np.int32(v), np.int32(kq), np.int32(r))
        args = (*sizes, x, np.int64(sv), np.int64(sk), kfast, top, q, np.int32(q.shape[2]), s)
        self._q((blocks, 1, 1), (ELEMENT_THREADS, 1, 1), args)
        return q, s, l1

    def _stats(self, x: cp.ndarray, axis: int) -> Stats:
        """Return the 1-norms and tops of `x`'s vectors along `axis` by the norms pass."""
        # The check's norms pass, its 2-norms and exponents left unread. Loaded here, not at start:
        # the route hands every floor the stats its own pass made.
        if self._norms_pass is None:
            self._norms_pass = stats_pass(self._arch)
        stats = Stats.empty(_vectors(x, axis)[0])
        exponent_pass(*self._norms_pass, self._sms, x, axis, None, stats)
        return stats
