"""Ozaki scheme II behind its per-call check: C at the fewest moduli the inputs admit, or elsewhere.

One pass over each operand makes its norms (gpu/ozaki_guard.py), the check judges them with its
sample, and the engine of the admitted count (gpu/ozaki.py, one a count, made once) takes its
exponents from the same norms, so the operands are read once for the norms and once for the
residues. What no count up to the cap carries, or an input that is not finite, goes to the
fallback the caller gives (the 3xTF32 kernel in `high`) with C untouched. The check's verdict is
read on the host before the residues are made: a call waits for its first passes.
"""

from __future__ import annotations

from collections.abc import Callable

import cupy as cp

from ..kernels.ozaki_choice import MAX_MODULI
from ..kernels.ozaki_guard import ADVANTAGE, Verdict
from .ozaki import OzakiGemm
from .ozaki_guard import DeviceGuard


class OzakiRoute:
    """FP32 GEMM on the INT8 tensor cores where the check admits it, else `fallback`.

    Args:
        max_moduli: the most INT8 GEMMs worth running (ozaki_choice.MAX_MODULI).
        kernel: the INT8 kernel of every engine (OzakiGemm's; its fastest for the device when None).
        fallback: f(a, b, alpha, beta, c, trans_a, trans_b) -> C, for what the check sends away;
            None raises instead.
        advantage: the check's (ozaki_guard.ADVANTAGE; 1 where cuBLAS was measured to sum as one chain).

    Example:
        route = OzakiRoute(fallback=lambda a, b, al, be, c, ta, tb: autotune.matmul(...))
        c, verdict = route(a, b)  # verdict.moduli: 7 for uniform inputs
    """

    def __init__(
        self,
        max_moduli: int = MAX_MODULI,
        kernel: str | None = None,
        fallback: Callable | None = None,
        advantage=ADVANTAGE,
    ):
        self.max_moduli, self.kernel, self.fallback, self.advantage = max_moduli, kernel, fallback, advantage
        self.guard = DeviceGuard()
        self._engines: dict[int, OzakiGemm] = {}

    def engine(self, n: int) -> OzakiGemm:
        """Return the engine of `n` moduli (compiled and loaded on its first use)."""
        if n not in self._engines:
            self._engines[n] = OzakiGemm(n, kernel=self.kernel)
        return self._engines[n]

    def __call__(
        self, a: cp.ndarray, b: cp.ndarray, alpha=1.0, beta=0.0, c=None, trans_a=False, trans_b=False
    ) -> tuple[cp.ndarray, Verdict]:
        """Return (alpha op(A) op(B) + beta C, the check's verdict); C updated in place when given.

        Args:
            a, b: float32 A (M x K, K x M with `trans_a`) and B (K x N, N x K with `trans_b`).
            c: float32 M x N with contiguous rows; a new one when None (then beta must be 0).
        Raises:
            ValueError: shapes that do not multiply, or the check sent the call away and there is
                no fallback.
        """
        opa, opb = a.T if trans_a else a, b.T if trans_b else b
        if opa.ndim != 2 or opb.ndim != 2 or opa.shape[1] != opb.shape[0]:
            raise ValueError(f"op(A) {opa.shape} and op(B) {opb.shape} do not multiply")
        if c is None and beta != 0:
            raise ValueError("beta != 0 needs C")
        na, nb = self.guard.norms(opa, 0), self.guard.norms(opb, 1)
        v = self.guard.admit(opa, opb, self.max_moduli, norms=(na, nb), advantage=self.advantage)
        if v.moduli is None:
            if self.fallback is None:
                raise ValueError(f"the check sends these inputs to another method ({v})")
            return self.fallback(a, b, alpha, beta, c, trans_a, trans_b), v
        eng, k = self.engine(v.moduli), int(opa.shape[1])
        ra = eng.scale(opa, 0, eng.exponents_of(na, k))
        rb = eng.scale(opb, 1, eng.exponents_of(nb, k))
        if c is None:
            c = cp.empty((opa.shape[0], opb.shape[1]), cp.float32)
        return eng.reconstruct(eng.products(ra, rb), ra.e, rb.e, c, alpha, beta), v
