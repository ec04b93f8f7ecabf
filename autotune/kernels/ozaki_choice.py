"""The Ozaki route's error, bounded and measured: the scaling's bound, the contract's measures.

The only error of Ozaki scheme II (kernels/ozaki.py) before C's last rounding is the rounding of
the scaled operands to integers; `bound` bounds it element by element from the inputs (a GEMM of
magnitudes: the proof's statement, which the tests check; a call's own check is ozaki_guard's).
Also the cap on the moduli, the contract's two error measures and the input kinds the tests and
benchmarks draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ozaki import scale

# At the INT8 rate cuBLASLt reached on the H100 (965 TOPS at 8192^3), n moduli run at most
# 965 / n TFLOP/s: 8 give 121, no more than 3xTF32's 118. Past 8, only an INT8 kernel faster than
# cuBLASLt's could win, which a caller that has measured one raises the cap for.
MAX_MODULI = 8

OTHER = "3xtf32"  # the method a call goes to when the INT8 route needs too many moduli


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


def bound(a: np.ndarray, b: np.ndarray, n: int) -> Bound:
    """Return the bound on the error of scaling op(A) and op(B) to integers for `n` moduli.

    With a' = a 2^e + d (|d| <= 1/2, 0 where a is 0) and b' likewise, A'B' 2^(-e-f) - AB is
    2^-e (d |B|) + 2^-f (|A| d') + 2^(-e-f) (d d'): at most E = 2^-e/2 T1 + 2^-f/2 T2 +
    2^(-e-f)/4 T3 with T1 = [A != 0] |B|, T2 = |A| [B != 0], T3 = [A != 0] [B != 0]. Cancellation
    does not enter: E, and FP32's own error, scale with |A||B|, not |C|.
    """
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    na, nb = (a64 != 0).astype(np.float64), (b64 != 0).astype(np.float64)
    s = scale(a, b, n)
    g, h = np.ldexp(1.0, -s.e)[:, None], np.ldexp(1.0, -s.f)[None, :]
    e = 0.5 * (g * (na @ b64) + h * (a64 @ nb)) + 0.25 * (g * h) * (na @ nb)
    mag = a64 @ b64
    live = mag > 0
    if not live.any():
        return Bound(0.0, 0.0, 0.0)
    r = e[live] / mag[live]
    return Bound(float(r.max()), float(e.max() / mag.max()), float(np.median(r)))


def errors(out, a, b, xp=np) -> tuple[float, float]:
    """Return the contract's (max |C - C64| / max |C64|, median |C - C64| / (|A||B|)) of `out`.

    The runner's measures (gpu/precision.py), against the float64 product of the same operands.

    Args:
        out, a, b: C and the operands, arrays of `xp` (NumPy, or CuPy for arrays on the device).
    """
    # Widened on the host: CuPy's kernels flush FP32 subnormals (-ftz=true), NumPy's conversion keeps
    # them (C of subnormal-scaled inputs is itself near FP32's smallest normal).
    a64, b64, out64 = (xp.asarray(np.asarray(x.get() if hasattr(x, "get") else x, np.float64)) for x in (a, b, out))
    ref, s = a64 @ b64, xp.abs(a64) @ xp.abs(b64)
    diff = xp.abs(out64 - ref)
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
