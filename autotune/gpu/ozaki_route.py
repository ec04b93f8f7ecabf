"""Ozaki scheme II behind its per-call check: C at the fewest moduli the inputs admit, or elsewhere.

One pass over each operand makes its norms (gpu/ozaki_guard.py), the check judges them with its
sample, and the engine of the admitted count (gpu/ozaki.py, one a count, made once) takes its
exponents from the same norms, so the operands are read once for the norms and once for the
residues. What no count up to the cap carries, or an input that is not finite, goes to the
fallback the caller gives (the 3xTF32 kernel in `high`) with C untouched. The residues and GEMMs
of the count the shape was last admitted at are enqueued first, the check after them on a stream
of its own, and the host reads its verdict only before the CRT: where the guess holds, the device
never waits for the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import cupy as cp

from ..kernels.ozaki import fits
from ..kernels.ozaki_choice import MAX_MODULI, OTHER
from ..kernels.ozaki_guard import ADVANTAGE, Verdict
from .ozaki import OzakiGemm, Residues, Stats
from .ozaki_element import DeviceElement, Floor
from .ozaki_guard import DeviceGuard


class Routed(NamedTuple):
    """One call's result: C, the check's verdict, and the moduli C was made with (None: fallback).

    `moduli` is at least the verdict's: a guess of more that the check admits fewer for is kept
    (its GEMMs had run, and more moduli are no less accurate).
    """

    c: object
    verdict: Verdict
    moduli: int | None


class _Exponents(NamedTuple):
    """One count's exponents enqueued: its engine, op(A)'s and op(B)'s, and an event after them."""

    eng: OzakiGemm
    e: cp.ndarray
    f: cp.ndarray
    made: cp.cuda.Event


class _Run(NamedTuple):
    """One count's stages enqueued: its exponents, residues and products."""

    ex: _Exponents
    ra: Residues
    rb: Residues
    p: cp.ndarray


class OzakiRoute:
    """FP32 GEMM on the INT8 tensor cores where the check admits it, else `fallback`.

    Args:
        max_moduli: the most INT8 GEMMs worth running (ozaki_choice.MAX_MODULI).
        kernel: the INT8 kernel of every engine (OzakiGemm's; its fastest for the device when None).
        fallback: f(a, b, alpha, beta, c, trans_a, trans_b) -> C, for what the check sends away;
            None raises instead.
        advantage: the check's (ozaki_guard.ADVANTAGE; 1 where cuBLAS was measured to sum as one chain).
        overlap: the check on a stream of its own, beside the residues and GEMMs (else on the
            caller's stream, after any enqueued before it).
        speculate: the residues and GEMMs of the shape's last count (else of any shape's) enqueued
            before the verdict is read; else after it, the host waiting for the check.
        element: also hold every element of C within the tier's bound (gpu/ozaki_element.py: the
            |A||B| floor beside the check, judged at the count that runs); a call it fails goes
            to the fallback, its verdict OTHER.

    Example:
        route = OzakiRoute(fallback=lambda a, b, al, be, c, ta, tb: autotune.matmul(...))
        c, verdict, moduli = route(a, b)  # verdict.moduli: 7 for uniform inputs
    """

    def __init__(
        self,
        max_moduli: int = MAX_MODULI,
        kernel: str | None = None,
        fallback: Callable | None = None,
        advantage=ADVANTAGE,
        overlap: bool = True,
        speculate: bool = True,
        element: bool = False,
    ):
        self.max_moduli, self.kernel, self.fallback, self.advantage = max_moduli, kernel, fallback, advantage
        self.overlap, self.speculate = overlap, speculate
        self.guard = DeviceGuard()
        self.element = DeviceElement() if element else None
        self._engines: dict[int, OzakiGemm] = {}
        self._last: dict[tuple[int, int, int], int | None] = {}  # a shape's last count run (None: sent away)
        self._recent: int | None = None  # any shape's
        self._side: cp.cuda.Stream | None = None

    def engine(self, n: int) -> OzakiGemm:
        """Return the engine of `n` moduli (compiled and loaded on its first use)."""
        if n not in self._engines:
            self._engines[n] = OzakiGemm(n, kernel=self.kernel)
        return self._engines[n]

    def __call__(
        self,
        a: cp.ndarray,
        b: cp.ndarray,
        alpha=1.0,
        beta=0.0,
        c=None,
        trans_a=False,
        trans_b=False,
        *,
        fallback: Callable | None = None,
        advantage=None,
    ) -> Routed:
        """Return (alpha op(A) op(B) + beta C, the verdict, the moduli run); C updated in place.

        Args:
            a, b: float32 A (M x K, K x M with `trans_a`) and B (K x N, N x K with `trans_b`).
            c: float32 M x N with contiguous rows; a new one when None (then beta must be 0).
            fallback, advantage: this call's, where not the route's (one route serves many shapes).
        Raises:
            ValueError: shapes that do not multiply, or the check sent the call away and there is
                no fallback.
        """
        opa, opb = a.T if trans_a else a, b.T if trans_b else b
        if opa.ndim != 2 or opb.ndim != 2 or opa.shape[1] != opb.shape[0]:
            raise ValueError(f"op(A) {opa.shape} and op(B) {opb.shape} do not multiply")
        if c is None and beta != 0:
            raise ValueError("beta != 0 needs C")
        (m, k), n = opa.shape, int(opb.shape[1])
        sa = sb = None
        if self.element is not None:  # the guarantee's 1-norms and tops, from the norms' loads
            sa, sb = Stats.empty(m), Stats.empty(n)
        na, nb = self.guard.norms(opa, 0, stats=sa), self.guard.norms(opb, 1, stats=sb)
        ready = cp.cuda.Event(block=False, disable_timing=True)
        ready.record()  # the norms made: what the check waits for on its stream
        guess = self._guess((m, n, k))
        # The guess's GEMMs first: the host enqueues the check while the device runs them.
        run = self._stages(guess, opa, opb, na, nb, k) if guess is not None else None
        args = (opa, opb, self.max_moduli, 0, (na, nb), self.advantage if advantage is None else advantage)
        with self._check_stream(ready):
            pending = self.guard.launch(*args)
            floor = self._floor(opa, opb, (sa, sb))
        v = pending.verdict()
        if v.moduli is not None:
            run = self._admitted(v.moduli, run, floor, opa, opb, na, nb, k)
            if run is None:
                v = Verdict(OTHER, None, v.normwise, v.median)
        if v.moduli is None:
            # No guess for the shape's next call: its GEMMs would run before a verdict that may
            # send it away again.
            self._remember((m, n, k), None)
            fallback = fallback or self.fallback
            if fallback is None:
                raise ValueError(f"the check sends these inputs to another method ({v})")
            return Routed(fallback(a, b, alpha, beta, c, trans_a, trans_b), v, None)
        self._remember((m, n, k), v.moduli)
        eng = run.ex.eng
        if c is None:
            c = cp.empty((m, n), cp.float32)
        return Routed(eng.reconstruct(run.p, run.ra.e, run.rb.e, c, alpha, beta), v, eng.n)

    def _admitted(self, count: int, run: _Run | None, floor, opa, opb, na, nb, k: int) -> _Run | None:
        """Return the stages C is made from at the admitted `count` (None: the guarantee fails).

        The guess's run where it has at least `count` moduli; else the count's, enqueued now.
        """
        if run is None or run.ex.eng.n < count:  # no guess, or too few: the GEMMs run again
            ex = self._exponents(count, na, nb, k)
            # Judged before these GEMMs: a call the guarantee fails costs them nothing.
            return self._stages(count, opa, opb, na, nb, k, ex) if self._holds(floor, ex) else None
        return run if self._holds(floor, run.ex) else None

    def _check_stream(self, ready: cp.cuda.Event) -> cp.cuda.Stream:
        """Return the checks' stream: a side one after `ready` (overlap), else the current one."""
        if not self.overlap:
            return cp.cuda.get_current_stream()
        if self._side is None:  # the highest priority (CUDA clamps to it): its blocks go first
            self._side = cp.cuda.Stream(non_blocking=True, priority=-(2**20))
        self._side.wait_event(ready)
        return self._side

    def _floor(self, opa, opb, stats=None) -> Floor | None:
        """Enqueue the elementwise guarantee's floor (None: not asked for, or K too deep for it).

        Args:
            stats: op(A)'s and op(B)'s Stats where the norms' pass made them (a None: the floor does).
        """
        if self.element is None:
            return None
        try:
            return self.element.floor(opa, opb, stats=stats)
        except ValueError:  # K past the raw sums' exact range: the guarantee cannot be shown
            return None

    def _holds(self, floor: Floor | None, ex: _Exponents) -> bool:
        """Return whether the count keeps every element within the bound (the host waits).

        True without the guarantee; False where it was asked for and has no floor (K too deep).
        """
        if self.element is None:
            return True
        if floor is None:
            return False
        with self._check_stream(ex.made) as stream:
            bad = self.element.failures(floor, ex.e, ex.f, ex.eng.n)
            # Read on the checks' stream: a copy on the caller's (or a synchronous one, which
            # waits on the legacy default stream) would wait for the GEMMs enqueued before it.
            return int(bad.get(stream=stream)[0]) == 0

    def _exponents(self, count: int, na, nb, k: int) -> _Exponents:
        """Enqueue the exponents at `count` moduli, from the norms."""
        eng = self.engine(count)
        e, f = eng.exponents_of(na, k), eng.exponents_of(nb, k)
        made = cp.cuda.Event(block=False, disable_timing=True)
        made.record()  # what the elementwise judge reads, before any GEMM
        return _Exponents(eng, e, f, made)

    def _stages(self, count: int, opa, opb, na, nb, k: int, ex: _Exponents | None = None) -> _Run:
        """Enqueue the exponents (unless given), residues and GEMMs at `count` moduli."""
        ex = ex or self._exponents(count, na, nb, k)
        ra, rb = ex.eng.scale(opa, 0, ex.e), ex.eng.scale(opb, 1, ex.f)
        return _Run(ex, ra, rb, ex.eng.products(ra, rb))

    def _guess(self, shape: tuple[int, int, int]) -> int | None:
        """Return the count to enqueue before the verdict: the shape's last, else any shape's.

        None where the shape's last call went elsewhere.
        """
        if not self.speculate:
            return None
        guess = self._last.get(shape, self._recent)
        return guess if guess is not None and guess <= self.max_moduli and fits(guess, shape[2]) else None

    def _remember(self, shape: tuple[int, int, int], count: int | None) -> None:
        """Keep `count` as the shape's guess and any shape's (a bound on the shapes kept).

        None (the call went elsewhere): no guess for the shape, any shape's kept.
        """
        if shape not in self._last and len(self._last) >= 256:
            self._last.clear()
        self._last[shape] = count
        if count is not None:
            self._recent = count
