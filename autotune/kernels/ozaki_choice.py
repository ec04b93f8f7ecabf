"""How many INT8 moduli a call's inputs need for a tier, from a bound on the scaling's error.

The only error of Ozaki scheme II (kernels/ozaki.py) before C's last rounding is the rounding of
the scaled operands to integers; it is bounded element by element from the inputs, so the number
of moduli is chosen per call: the fewest whose bound meets the tier's target, or none (the call
goes to 3xTF32) when more than a cap would be needed. Also the contract's two error measures and
the input kinds the tests and benchmarks/ozaki_curve.py draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.tiers import TIERS, U_TF32, U
from .ozaki import MODULI, fits, scale

# Per tier, the largest error bound the scaled rounding may have, relative to (|A||B|)_ij. high:
# one FP32 unit roundoff, less than any FP32 sum of two or more products can promise (gamma_K =
# K u), so C's last rounding, not the scaling, sets its error. medium: one TF32 unit roundoff,
# half of what a product of two TF32-rounded operands may miss.
TARGETS = {"high": U, "medium": U_TF32}

# At the INT8 rate cuBLASLt reached on the H100 (965 TOPS at 8192^3), n moduli run at most
# 965 / n TFLOP/s: 8 give 121, no more than 3xTF32's 118. Past 8, only an INT8 kernel faster than
# cuBLASLt's could win, which a caller that has measured one raises the cap for.
MAX_MODULI = 8

OTHER = "3xtf32"  # the method a call goes to when the INT8 route needs too many moduli


@dataclass(frozen=True)
class Choice:
    """The method for one call: 'ozaki-int8' with `moduli`, or OTHER with moduli None.

    Args:
        method: "ozaki-int8" or OTHER.
        moduli: the number of INT8 GEMMs, or None.
        bound: the scaling error's bound at that count (at the cap for OTHER; None for non-finite inputs).
    """

    method: str
    moduli: int | None
    bound: Bound | None


@dataclass(frozen=True)
class _Terms:
    """The n-independent products of the bound: E = g T1 + h T2 + g h T3, and S = |A||B|."""

    t1: np.ndarray  # [A != 0] |B|: where A's rounding meets B
    t2: np.ndarray  # |A| [B != 0]
    t3: np.ndarray  # [A != 0] [B != 0]
    s: np.ndarray  # |A| |B|


def _terms(a: np.ndarray, b: np.ndarray, estimate: bool) -> _Terms:
    """Return the bound's products; with `estimate`, root-sum-squares in place of sums."""
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    na, nb = (a64 != 0).astype(np.float64), (b64 != 0).astype(np.float64)
    if estimate:
        return _Terms(np.sqrt(na @ (b64 * b64)), np.sqrt((a64 * a64) @ nb), np.sqrt(na @ nb), a64 @ b64)
    return _Terms(na @ b64, a64 @ nb, na @ nb, a64 @ b64)


@dataclass(frozen=True)
class Bound:
    """The scaling error's bound E for one number of moduli, against S = |A||B|.

    Args:
        elementwise: max over C's elements of E_ij / S_ij (0 where S_ij is 0: every product is).
        normwise: max E / max S (the contract's max measure, FP32's error being S's size).
        median: the median of E_ij / S_ij (the contract's median measure).
    """

    elementwise: float
    normwise: float
    median: float

    def meets(self, tier: str, k: int) -> bool:
        """Return whether it meets `tier`'s target, and half its bound element by element."""
        target = TARGETS[tier]
        return self.normwise <= target and self.median <= target and self.elementwise <= TIERS[tier].bound(k) / 2


def bound(a: np.ndarray, b: np.ndarray, n: int, estimate: bool = False, sigmas: float = 6.0) -> Bound:
    """Return the bound on the error of scaling op(A) and op(B) to integers for `n` moduli.

    With a' = a 2^e + d (|d| <= 1/2, 0 where a is 0) and b' likewise, A'B' 2^(-e-f) - AB is
    2^-e (d |B|) + 2^-f (|A| d') + 2^(-e-f) (d d'): at most 2^-e/2 T1 + 2^-f/2 T2 + 2^(-e-f)/4 T3
    (_Terms). `estimate`: the roundings taken as independent and uniform (standard deviation
    1/sqrt(12) each), `sigmas` standard deviations of their sums in place of the worst case (about
    sqrt(K) times smaller). Cancellation does not enter: E, and FP32's own error, scale with
    |A||B|, not |C|; the contract measures both against the same |A||B| or max |C|.
    """
    return _bound(_terms(a, b, estimate), scale(a, b, n), estimate, sigmas)


def _bound(t: _Terms, s, estimate: bool, sigmas: float) -> Bound:
    g = np.ldexp(1.0, -s.e)[:, None]
    h = np.ldexp(1.0, -s.f)[None, :]
    w, w3 = (sigmas / np.sqrt(12.0), sigmas / 12.0) if estimate else (0.5, 0.25)
    e = w * (g * t.t1 + h * t.t2) + w3 * (g * h) * t.t3
    live = t.s > 0
    if not live.any():
        return Bound(0.0, 0.0, 0.0)
    r = e[live] / t.s[live]
    return Bound(float(r.max()), float(e.max() / t.s.max()), float(np.median(r)))


def choose(
    a: np.ndarray,
    b: np.ndarray,
    tier: str = "high",
    max_moduli: int = MAX_MODULI,
    estimate: bool = False,
    sigmas: float = 6.0,
) -> Choice:
    """Return the fewest moduli whose error bound meets `tier`'s target on these inputs, or OTHER.

    Args:
        a, b: op(A) (M x K) and op(B) (K x N).
        tier: a key of TARGETS.
        max_moduli: the most INT8 GEMMs worth running (MAX_MODULI: past it 3xTF32 is as fast).
        estimate, sigmas: as `bound`: a statistical bound in place of the worst case.
    Returns:
        Choice; OTHER as well for inputs with an infinity or NaN, which integers cannot carry.
    """
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return Choice(OTHER, None, None)
    k = np.shape(a)[1]
    # The products are computed once; only the powers of two change with the number of moduli.
    # On a device they are one low-precision GEMM of magnitudes, about one modulus's cost.
    t = _terms(a, b, estimate)
    last = None
    for n in range(1, min(max_moduli, len(MODULI)) + 1):
        if not fits(n, k):
            continue
        last = _bound(t, scale(a, b, n), estimate, sigmas)
        if last.meets(tier, k):
            return Choice("ozaki-int8", n, last)
    return Choice(OTHER, None, last)


def errors(out, a, b, xp=np) -> tuple[float, float]:
    """Return the contract's (max |C - C64| / max |C64|, median |C - C64| / (|A||B|)) of `out`.

    The runner's measures (gpu/precision.py), against the float64 product of the same operands.

    Args:
        out, a, b: C and the operands, arrays of `xp` (NumPy, or CuPy for arrays on the device).
    """
    a64, b64 = xp.asarray(a, xp.float64), xp.asarray(b, xp.float64)
    ref, s = a64 @ b64, xp.abs(a64) @ xp.abs(b64)
    diff = xp.abs(xp.asarray(out, xp.float64) - ref)
    top = float(xp.abs(ref).max())
    rel = xp.where(s > 0, diff / xp.where(s > 0, s, 1.0), 0.0)  # (the division is never by 0)
    return float(diff.max()) / (top if top > 0 else 1.0), float(xp.median(rel))


KINDS = ("uniform", "normal", "wide", "cancelling", "rowscaled", "denormal", "smallint", "coupled")


def operands(kind: str, m: int, k: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Return float32 op(A) (m x k) and op(B) (k x n) of one input kind (KINDS).

    uniform in [-1, 1); normal; wide: 2^U(-20, 20) with random signs, element by element;
    cancelling: A = [X, X + 2^-12 Y], B = [Z; -Z], so C = -2^-12 Y Z, 2^-12 of |A||B|;
    rowscaled: uniform, A's rows and B's columns times 2^U(-20, 20); denormal: A uniform times
    2^-130 (FP32 subnormals), B uniform; smallint: integers in [-8, 8]; coupled: A's columns times
    2^s_k and B's rows times 2^-s_k, s_k in U(-10, 10), so a row of A spreads over 20 binades that
    B's column undoes (the spread that costs Ozaki scheme II the most bits).
    """

    def uni(*shape):
        return rng.random(shape) * 2 - 1

    if kind == "uniform":
        a, b = uni(m, k), uni(k, n)
    elif kind == "normal":
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    elif kind == "wide":
        a, b = (np.where(rng.random(s) < 0.5, -1, 1) * np.exp2(rng.random(s) * 40 - 20) for s in ((m, k), (k, n)))
    elif kind == "cancelling":
        h = k // 2
        x, y, z = uni(m, h), uni(m, h), uni(h, n)
        a, b = np.hstack([x, x + 2.0**-12 * y]), np.vstack([z, -z])
    elif kind == "rowscaled":
        a = uni(m, k) * np.exp2(rng.random((m, 1)) * 40 - 20)
        b = uni(k, n) * np.exp2(rng.random((1, n)) * 40 - 20)
    elif kind == "denormal":
        a, b = uni(m, k) * 2.0**-130, uni(k, n)
    elif kind == "smallint":
        a, b = rng.integers(-8, 9, (m, k)), rng.integers(-8, 9, (k, n))
    elif kind == "coupled":
        s = rng.random(k) * 20 - 10
        a, b = uni(m, k) * np.exp2(s)[None, :], uni(k, n) * np.exp2(-s)[:, None]
    else:
        raise ValueError(f"unknown input kind {kind!r}; known: {', '.join(KINDS)}")
    return np.asarray(a, np.float32), np.asarray(b, np.float32)
