"""Ozaki scheme II in NumPy, exactly: FP32 GEMM as INT8 x INT8 -> INT32 products modulo coprimes.

op(A)'s rows and op(B)'s columns are scaled by powers of two and rounded to integers, the integer
product A'B' is computed modulo each of several pairwise-coprime moduli (one INT8 GEMM each,
simulated here in int64 with the INT32 bound asserted), rebuilt exactly by the Chinese remainder
theorem, unscaled, and combined with alpha and beta in FP64 before one rounding to FP32. The
reference the INT8 kernels and their reconstruction are checked against; NumPy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

# Pairwise coprime, each <= 256 so that its symmetric residues fit int8: 256 = 2^8, 255 = 3 5 17,
# 253 = 11 23, 247 = 13 19, 217 = 7 31, the rest primes. Largest first: each modulus adds
# log2(m) bits to the range the product can be rebuilt in, so the largest give the most bits a GEMM.
MODULI = (256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, 199, 197, 193, 191, 181, 179, 173)

INT32_MAX = 2**31 - 1
# The deepest residue: 256's symmetric residues are [-128, 127], the others' within [-127, 127].
RESIDUE_MAX = 128
# The depth of K one INT32 accumulation may run before it is reduced modulo m: the largest power
# of two with KC * 128^2 <= 2^31 - 1 (2^16 * 2^14 = 2^30; 2^17 would reach 2^31, one past INT32's
# top, when every product is (-128)(-128)). A power of two, so every kernel's depth of K divides it.
K_CHUNK = 2**16


@cache
def moduli(n: int) -> tuple[int, ...]:
    """Return the first `n` moduli (ValueError beyond the table).

    Args:
        n: how many, 1 to len(MODULI).
    """
    if not 1 <= n <= len(MODULI):
        raise ValueError(f"{n} moduli: from 1 to {len(MODULI)}")
    return MODULI[:n]


def range_bits(n: int) -> float:
    """Return log2 of P, the product of the first `n` moduli.

    A'B' is rebuilt while |A'B'| < P / 2.
    """
    return sum(math.log2(m) for m in moduli(n))


def fits(n: int, k: int) -> bool:
    """Return whether `n` moduli leave room for a row of `k` rounded elements (see _exponents)."""
    return 2.0 ** norm_bits(n) > math.sqrt(k) / 2


def norm_bits(n: int) -> int:
    """Return the bits h each scaled row of A and column of B may have: ||a'||_2 <= 2^h.

    By Cauchy-Schwarz |(A'B')_ij| <= ||a'_i|| ||b'_j|| <= 2^(2h), and 2^(2h) < P / 2 makes the
    symmetric CRT reconstruction unique: h = floor((log2 P - 1) / 2), less a bit of margin so the
    float64 norms' own rounding cannot break it.
    """
    return math.floor((range_bits(n) - 1.0) / 2 - 2.0**-20)


@dataclass(frozen=True)
class Scaled:
    """Integer operands and their powers of two: A = 2^-e[:, None] A' (to rounding), B likewise.

    Args:
        a: op(A) scaled and rounded, float64 holding integers exactly, M x K.
        b: op(B) scaled and rounded, K x N.
        e: the exponent each row of A was scaled by (int64, M).
        f: the exponent each column of B was scaled by (int64, N).
    """

    a: np.ndarray
    b: np.ndarray
    e: np.ndarray
    f: np.ndarray


def _exponents(norms: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Return the largest e per vector with ||x 2^e|| + sqrt(k) / 2 <= 2^bits (0 for zero ones)."""
    # Rounding each of k elements to the nearest integer moves the vector by at most sqrt(k) / 2,
    # so the rounded vector's norm stays within 2^bits.
    room = 2.0**bits - math.sqrt(k) / 2
    if room <= 0:
        raise ValueError(f"a norm of 2^{bits} cannot hold the rounding of {k} elements: more moduli")
    safe = np.where(norms > 0, norms, 1.0) * (1 + 2.0**-40)  # the float64 norm's own rounding
    e = np.floor(np.log2(room) - np.log2(safe)).astype(np.int64)
    # log2's rounding can be one off either way: step down where the bound fails, up where it holds.
    e -= np.ldexp(safe, e) > room
    e += np.ldexp(safe, e + 1) <= room
    return np.where(norms > 0, e, 0)


def scale(a: np.ndarray, b: np.ndarray, n: int) -> Scaled:
    """Return op(A) (M x K) and op(B) (K x N) scaled to integers for `n` moduli.

    Each row of A is multiplied by the power of two that brings its 2-norm just under 2^h
    (norm_bits), then rounded to the nearest integer; B's columns likewise. With n = 8, h = 31: a
    row's largest element keeps up to 31 bits, more than FP32's 24, unless the row's other elements
    carry most of its norm. Exact in float64: x 2^e is exact, and rint of it is (below 2^53 it is
    rounded exactly; above, a float32's 24 bits times 2^e is an integer already).
    """
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    k = a64.shape[1]
    h = norm_bits(n)
    e = _exponents(np.linalg.norm(a64, axis=1), h, k)
    f = _exponents(np.linalg.norm(b64, axis=0), h, k)
    return Scaled(np.rint(np.ldexp(a64, e[:, None])), np.rint(np.ldexp(b64, f[None, :])), e, f)


def residues(x: np.ndarray, m: int) -> np.ndarray:
    """Return the symmetric residues of integer-valued float64 `x` modulo m, as int8.

    In [-(m // 2), m - 1 - m // 2]: [-128, 127] for 256, [-127, 127] for 255, [-126, 126] for 253.
    fmod is exact in floating point, so integers up to 2^1024 are reduced without error.
    """
    r = np.fmod(x, m)  # (-m, m), the sign of x
    r = np.where(r > m - 1 - m // 2, r - m, r)
    r = np.where(r < -(m // 2), r + m, r)
    return r.astype(np.int8)


def int8_gemm(ra: np.ndarray, rb: np.ndarray, m: int, k_chunk: int = K_CHUNK) -> np.ndarray:
    """Return (ra @ rb) mod m in [0, m), as an INT8 GEMM with INT32 accumulation computes it.

    K runs in chunks of `k_chunk`; each chunk's sum must fit INT32 (asserted, from the residues'
    largest magnitudes, before it is formed, and on the sums formed), and is reduced modulo m
    before the next is added, as a kernel reduces its accumulator at each chunk's end.
    """
    assert ra.dtype == np.int8 and rb.dtype == np.int8
    k = ra.shape[1]
    out = np.zeros((ra.shape[0], rb.shape[1]), np.int64)
    top = int(np.abs(ra.astype(np.int64)).max(initial=0)) * int(np.abs(rb.astype(np.int64)).max(initial=0))
    for k0 in range(0, k, k_chunk):
        depth = min(k_chunk, k - k0)
        assert m + depth * top <= INT32_MAX, f"INT32 accumulation of {depth} products of up to {top} overflows"
        part = ra[:, k0 : k0 + depth].astype(np.int64) @ rb[k0 : k0 + depth].astype(np.int64)
        out = out + part  # the accumulator holds the last chunk's residue in [0, m) plus this chunk
        assert np.abs(out).max(initial=0) <= INT32_MAX
        out = np.mod(out, m)
    return out


@cache
def _crt_weights(n: int) -> tuple[int, tuple[int, ...]]:
    """Return P and per modulus w_l = (P / m_l) ((P / m_l)^-1 mod m_l): x = sum r_l w_l mod P."""
    ms = moduli(n)
    p = math.prod(ms)
    return p, tuple((p // m) * pow(p // m, -1, m) for m in ms)


def crt(parts: list[np.ndarray], n: int) -> np.ndarray:
    """Return the integers x with |x| < P / 2 and x = parts[l] mod m_l (an object array of ints)."""
    p, w = _crt_weights(n)
    x = sum(part.astype(object) * wl for part, wl in zip(parts, w, strict=True)) % p
    return np.where(x > p // 2, x - p, x)


def exact_int_product(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """Return sa @ sb of integer-valued float64 operands exactly, as Python ints (object array)."""
    return sa.astype(np.int64).astype(object) @ sb.astype(np.int64).astype(object)


def gemm(
    a: np.ndarray, b: np.ndarray, n: int, alpha: float = 1.0, beta: float = 0.0, c: np.ndarray | None = None
) -> np.ndarray:
    """Return alpha op(A) @ op(B) + beta C in float32 by Ozaki scheme II with `n` INT8 moduli.

    Args:
        a: op(A), M x K, finite float32 (any float is read as float64).
        b: op(B), K x N.
        n: the number of moduli: n INT8 GEMMs; more moduli keep more bits of each operand.
        alpha, beta: the BLAS scalars; C is not read when beta is 0.
        c: C (M x N), needed when beta is not 0.
    Returns:
        float32 M x N: the exact product of the scaled integers, unscaled and combined in float64.
    """
    s = scale(a, b, n)
    parts = [int8_gemm(residues(s.a, m), residues(s.b, m), m) for m in moduli(n)]
    whole = crt(parts, n)
    # float() of a Python int rounds it once to float64; the power of two is exact.
    prod = np.ldexp(whole.astype(np.float64), -(s.e[:, None] + s.f[None, :]))
    out = alpha * prod
    if beta != 0:
        out = out + beta * np.asarray(c, np.float64)
    return out.astype(np.float32)
