"""Whether one call's inputs keep the Ozaki route within `high`: the check a call can afford.

ozaki_choice.bound needs |A||B| (a GEMM of magnitudes) and holds the scaling's worst case to one
unit roundoff, which asks for 8-9 moduli where 7 measure ten times below SGEMM's error. This check
costs O(M + N) from the rows' and columns' 2-norms the scaling pass computes anyway and O(P K) for
P sampled elements of C, and holds the route to what the contract compares it with: an FP32
SGEMM's own error on the same inputs (the model: the comment above RATIO).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.tiers import tier
from . import ozaki
from .family import TEMPLATE_DIR
from .ozaki import MODULI, fits, norm_bits
from .ozaki_choice import MAX_MODULI, OTHER
from .render import render_template, template

# The model, each rounding independent. The scaling rounds A 2^e to integers, each element off by
# some |d| <= 1/2, so C_ij is off by 2^-e_i sum_k d_ik b_kj + 2^-f_j sum_k a_ik d'_kj + 2^-(e_i+f_j)
# sum_k d_ik d'_kj, then by C's rounding to FP32. With random signs, its variance at a sampled element
# follows from the d themselves, and over all of C is bounded from the norms with d of variance 1/12.
# An SGEMM sums C_ij in one FMA chain (a cuBLAS thread runs K in order): each step rounds within half
# an ulp of its partial sum, uniformly, or loses a product smaller than that whole. The two are
# compared in the contract's measures: the largest standard deviation and the median over |A||B|.
# Against that chain emulated (benchmarks/ozaki_guard.py: 240 drawn shapes, every input kind) the
# route's errors at the admitted count were at most 1.16x the chain's (wide exponents at K near 20,
# where C's last rounding is most of both). RATIO: the contract allows 1.5x cuBLAS's errors, and
# the modelled ratio ran up to 1.35x low (tiny K): 1.5 / 1.35. ADVANTAGE: cuBLAS is no one chain.
# Where M and N are small and K large it splits K, and its errors on the device ran up to 6.6x
# (median) below the chain's (benchmarks/ozaki_guard_cublas.py in git at 3b20b88, H200, 140 draws of M, N <= 512 a
# seed): against one chain, 5-8 of 140 draws broke the contract at a ratio of 0.75, 1-2 at 0.4, none
# at 0.3 on either seed. So the SGEMM the route must match is the chain 3.7x (1.1 / 0.3) more
# accurate, but never below C's own rounding to FP32, which no SGEMM escapes: where that rounding
# is most of both (tiny K), the route passes within RATIO of it. A caller that has measured cuBLAS
# summing as one chain at its shape passes an advantage of 1.
RATIO = 1.1
ADVANTAGE = 3.7
# The contract's measures are normwise: the route's error at an element follows its row's and
# column's norms, not that element's |A||B|, so where a row's magnitudes spread widely (2^+-20
# at small K) an element can be off by far more than any order of summation could put it (the
# tier's elementwise bound, the fuzzer's), though the norms and medians pass. So the modelled
# standard deviation at every sampled element is held to the tier's bound there over ELEMENT_MARGIN:
# a sum of many roundings passes 8 standard deviations about once in 10^15. The elements the
# sample does not see can be worse (notes/precision.md): hence the elementwise floor behind it.
ELEMENT_MARGIN = 8.0
TOP = 8  # rows of A and columns of B with the largest norms, paired with each other
SAMPLES = 256  # random elements of C beside those
# The device's form of sample_stats (templates/_ozaki_guard.cu.j2): a block of GUARD_THREADS an
# element and GUARD_COUNTS counts (each count's sums are registers of every thread: at 8 a block,
# 118 registers left two blocks an SM and the H200's 132 SMs took 320 blocks in two waves).
GUARD_TEMPLATE = "_ozaki_guard.cu.j2"
GUARD_KERNEL = "autotune_ozaki_guard"
GUARD_THREADS = 256
GUARD_COUNTS = 4


@dataclass(frozen=True)
class Verdict:
    """The route's verdict for one call: the fewest moduli that pass, or OTHER.

    Args:
        method: "ozaki-int8", or OTHER (3xTF32) when no count up to the cap passes or an input
            is not finite.
        moduli: the count, or None.
        normwise: at that count (the cap's for OTHER), the bound on the route's largest standard
            deviation over C against the SGEMM's largest over the sample; None for non-finite inputs.
        median: the sample's median of the route's standard deviation over |A||B| against the
            SGEMM's; None likewise.
    """

    method: str
    moduli: int | None
    normwise: float | None
    median: float | None


def admit(a, b, max_moduli: int = MAX_MODULI, seed: int = 0, norms=None, stats=None, advantage=ADVANTAGE) -> Verdict:
    """Return the fewest moduli whose modelled error stays within RATIO of an SGEMM's, or OTHER.

    Args:
        a, b: op(A) (M x K) and op(B) (K x N), float32 (views included): NumPy arrays, or any
            arrays with a shape where `norms` and `stats` are given (gpu/ozaki_guard.py's device check).
        max_moduli: the most INT8 GEMMs worth running (ozaki_choice.MAX_MODULI).
        seed: the random sample of C's elements (the same inputs and seed, the same verdict).
        norms: (A's row 2-norms, B's column 2-norms) where the scaling pass has them, host arrays.
        stats: the sampled elements' sums, as `sample_stats(a, b)` returns them (NumPy's when None).
        advantage: how much more accurately (in standard deviation) the SGEMM compared with sums
            than one FP32 chain: ADVANTAGE unless measured at this shape (1: it sums as one chain).
    Returns:
        Verdict.

    Example:
        a, b = operands("uniform", 64, 2048, 48, np.random.default_rng(0))
        admit(a, b).moduli  # 7; "coupled" inputs: None (3xTF32)
    """
    if norms is None:
        norms = (np.linalg.norm(np.asarray(a, np.float64), axis=1), np.linalg.norm(np.asarray(b, np.float64), axis=0))
    na, nb = (np.asarray(x, np.float64) for x in norms)
    if not (np.isfinite(na).all() and np.isfinite(nb).all()):  # an Inf or NaN makes its vector's norm one
        return Verdict(OTHER, None, None, None)
    (m, k), n = a.shape, b.shape[1]
    counts = admissible(max_moduli, k)
    if not counts:
        return Verdict(OTHER, None, math.inf, math.inf)
    if m == 0 or n == 0 or na.max() == 0 or nb.max() == 0:  # C is 0 exactly (or empty) at any count
        return Verdict("ozaki-int8", counts[0], 0.0, 0.0)
    sample = _Sample(na, nb, (m, k, n), seed, counts, stats or sample_stats(a, b), advantage)
    # More moduli, larger exponents, smaller roundings: a count passes if every larger one does,
    # so the fewest is found by bisection (3 of the 8 counts judged, not up to 8).
    lo, hi, best = 0, len(counts) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        v = sample.judge(counts[mid])
        if v.moduli is not None:
            best, hi = v, mid - 1
        else:
            lo = mid + 1
    return best if best is not None else sample.judge(counts[-1])


def admissible(max_moduli: int, k: int) -> list[int]:
    """Return the counts the check judges: up to the cap, with room for K roundings a row."""
    return [c for c in range(1, min(max_moduli, len(MODULI)) + 1) if fits(c, k)]


def guard_source(counts: int = GUARD_COUNTS) -> str:
    """Return the device check's source: GUARD_KERNEL, for up to `counts` counts a launch."""
    src = template(TEMPLATE_DIR, GUARD_TEMPLATE)
    # The judge sorts the random part a thread an element.
    assert SAMPLES == GUARD_THREADS and GUARD_THREADS & (GUARD_THREADS - 1) == 0
    return render_template(src, NAME=GUARD_KERNEL, QMAX=counts, THREADS=GUARD_THREADS, TOP=TOP, SAMPLES=SAMPLES)


def sample_stats(a: np.ndarray, b: np.ndarray):
    """Return the NumPy form of the sums the check takes at each sampled element of C.

    Returns:
        stats(rows, cols, e, f): P sampled elements (row i of op(A), column j of op(B)); e and f
        (Q x P) each count's exponents of those rows and columns. It returns float64 (3 + 3Q) x P:
        an SGEMM's variance V (_chain_variance), S = sum |a_ik b_kj|, C = sum a_ik b_kj, then for
        each count the route's three sums of squared roundings (_Sample.judge), as the device's
        kernel (templates/_ozaki_guard.cu.j2) writes them.
    """

    def stats(rows, cols, e, f):
        pa = np.asarray(a)[rows].astype(np.float64)  # P x K: the sampled elements' rows and columns
        pb = np.asarray(b)[:, cols].T.astype(np.float64)
        pa2, pb2, p = pa * pa, pb * pb, pa * pb
        out = [_chain_variance(p), np.abs(p).sum(axis=1), p.sum(axis=1)]
        for eq, fq in zip(e, f, strict=True):
            sa, sb = pa * np.ldexp(1.0, eq)[:, None], pb * np.ldexp(1.0, fq)[:, None]
            da, db = (np.rint(sa) - sa) ** 2, (np.rint(sb) - sb) ** 2
            out += [(da * pb2).sum(axis=1), (pa2 * db).sum(axis=1), (da * db).sum(axis=1)]
        return np.stack(out)

    return stats


class _Sample:
    """The sampled elements of C and what each count's verdict needs of them (computed once)."""

    def __init__(self, na, nb, shape: tuple[int, int, int], seed: int, counts, stats, advantage=ADVANTAGE):
        (m, self.k, n), self.counts = shape, list(counts)
        self.rows, self.cols = _pairs(na, nb, m, n, seed)
        # e falls as the norm grows: the largest 2^-e of the nonzero vectors is the largest norm's.
        top_a, top_b = float(na.max()), float(nb.max())
        self.ea = _exponent_table(np.append(na[self.rows], top_a), self.counts, self.k)
        self.fb = _exponent_table(np.append(nb[self.cols], top_b), self.counts, self.k)
        self.na2, self.nb2 = top_a * top_a, top_b * top_b
        self.element = tier("high").bound(self.k) / ELEMENT_MARGIN
        out = np.asarray(stats(self.rows, self.cols, self.ea[:, :-1], self.fb[:, :-1]), np.float64)
        self.s, self.t = out[1], out[3:]
        # The route rounds each C_ij once to FP32 at the end: within half an ulp of it, uniform.
        last = np.maximum(np.ldexp(1.0, np.frexp(out[2])[1] - 24), 2.0**-149)
        self.final = last * last / 12
        # The SGEMM: the chain `advantage` times more accurate, but no better than that rounding.
        self.chain = np.sqrt(np.maximum(out[0] / (advantage * advantage), self.final))

    def judge(self, count: int) -> Verdict:
        """Return the verdict at `count` moduli: 'ozaki-int8' where every measure passes."""
        q, k = self.counts.index(count), self.k
        e, f = self.ea[q], self.fb[q]
        # A zero row or column is exact at any count (its e is 0, not a scale): left out, so g and
        # gh are of the largest norms.
        g, gh = math.ldexp(1.0, -int(e[-1])), math.ldexp(1.0, -int(f[-1]))
        # Over all of C, from the norms: V_ij <= (g_i^2 |b_j|^2 + h_j^2 |a_i|^2) / 12 + g_i^2 h_j^2 K / 144.
        top = (g * g * self.nb2 + gh * gh * self.na2) / 12 + (g * gh) ** 2 * k / 144
        top += self.final.max()
        g2, h2 = np.ldexp(1.0, -2 * e[:-1]), np.ldexp(1.0, -2 * f[:-1])
        t1, t2, t3 = self.t[3 * q : 3 * q + 3]
        route = np.sqrt(g2 * t1 + h2 * t2 + g2 * h2 * t3 + self.final)
        most = self.chain.max()
        normwise = math.sqrt(top) / most if most > 0 else (0.0 if top == 0 else math.inf)
        rand = slice(TOP * TOP, None)  # the random part: the top pairs would bias a median
        median = _median_ratio(route[rand], self.chain[rand], self.s[rand])
        live = self.s > 0  # where every product is 0, so is every rounding
        worst = float((route[live] / self.s[live]).max()) if live.any() else 0.0
        ok = normwise <= RATIO and median <= RATIO and worst / self.element <= 1.0  # as the device divides
        return Verdict("ozaki-int8" if ok else OTHER, count if ok else None, normwise, median)


def _exponent_table(norms: np.ndarray, counts, k: int) -> np.ndarray:
    """Return ozaki._exponents of `norms` at each count's bits: int64, counts x norms."""
    bits = np.array([norm_bits(c) for c in counts], np.float64)[:, None]
    room = np.ldexp(1.0, bits.astype(np.int64)) - math.sqrt(k) / 2  # > 0: fits() holds at each count
    safe = np.where(norms > 0, norms, 1.0) * (1 + 2.0**-40)
    e = np.floor(np.log2(room) - np.log2(safe)).astype(np.int64)
    e -= np.ldexp(safe, e) > room
    e += np.ldexp(safe, e + 1) <= room
    return np.where(norms > 0, e, 0)


def route_product(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Return the route's C at `n` moduli (NumPy): the scaled operands' exact product, in FP32.

    The numbers ozaki.gemm computes (its CRT rebuilds that product exactly) without its INT8
    GEMMs: the scaled operands' differences from A and B multiplied in float64, exact to 2^-53,
    far below FP32's 2^-24 (an element may round the other way).
    """
    s = ozaki.scale(a, b, n)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    da, db = np.ldexp(s.a, -s.e[:, None]) - a64, np.ldexp(s.b, -s.f[None, :]) - b64
    return (a64 @ b64 + (da @ b64 + a64 @ db + da @ db)).astype(np.float32)


def sgemm_chain(a: np.ndarray, b: np.ndarray, splits: int = 1) -> np.ndarray:
    """Return C as an SGEMM of one FP32 FMA chain per element sums it, K in order (NumPy).

    Each step adds a product (exact in float64) to the FP32 partial sum and rounds once, as an FMA.

    Args:
        splits: K cut into that many runs, each its own chain, their sums then added in order
            (an SGEMM that splits K, as cuBLAS does where M and N are small).
    """
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = None
    for run in np.array_split(np.arange(a64.shape[1]), max(1, splits)):
        c = np.zeros((a64.shape[0], b64.shape[1]), np.float32)
        for k in run:
            c = (c + np.outer(a64[:, k], b64[k])).astype(np.float32)
        out = c if out is None else (out.astype(np.float64) + c).astype(np.float32)
    return out


def measured_advantage(a, b, c, seed: int = 0, stats=None, norms=None) -> float:
    """Return how much more accurately than one FP32 chain an SGEMM summed `c`: admit's advantage.

    Its errors at the check's sampled elements against their float64 sums, beside one chain's
    modelled errors there (medians over |A||B|, of the random part): a search that measures
    cuBLAS so at a shape lets the check ask of the route no more than that SGEMM's accuracy needs,
    where ADVANTAGE assumes the most the device has shown at any shape.

    Args:
        a, b: op(A) (M x K) and op(B) (K x N), float32 NumPy arrays (any arrays, with `stats`
            and `norms`).
        c: that SGEMM's C (M x N) as a NumPy array, or a function (rows, cols) -> its elements
            there in float64 on the host (a device's C, read at the sample alone).
        seed, stats, norms: as admit's.
    Returns:
        At least 1 (the check never asks less than one chain's accuracy); inf where the SGEMM was
        exact and the chain is not.

    Example:
        measured_advantage(a, b, cupy.matmul(da, db).get())  # about 1 at 4096^3, 3-7 split K
    """
    if norms is None:
        norms = (np.linalg.norm(np.asarray(a, np.float64), axis=1), np.linalg.norm(np.asarray(b, np.float64), axis=0))
    na, nb = (np.asarray(x, np.float64) for x in norms)
    (m, _), n = a.shape, b.shape[1]
    if m == 0 or n == 0:
        return 1.0
    rows, cols = _pairs(na, nb, m, n, seed)
    none = np.zeros((0, len(rows)), np.int64)
    out = np.asarray((stats or sample_stats(a, b))(rows, cols, none, none), np.float64)
    rand = slice(TOP * TOP, None)
    chain, s, exact = np.sqrt(out[0][rand]), out[1][rand], out[2][rand]
    at = c if callable(c) else (lambda r, q: np.asarray(c, np.float64)[r, q])
    err = np.abs(np.asarray(at(rows[rand], cols[rand]), np.float64) - exact)
    live = s > 0
    if not live.any():
        return 1.0
    # A sum of many independent roundings is near normal: the median of |X| is 0.6745 sigma.
    model, meas = float(np.median(chain[live] / s[live])), float(np.median(err[live] / s[live])) / 0.6745
    if meas == 0:
        return 1.0 if model == 0 else math.inf
    return max(1.0, model / meas)


def _median_ratio(route: np.ndarray, chain: np.ndarray, s: np.ndarray) -> float:
    """Return the route's median error over |A||B| against the SGEMM's, over the random sample."""
    live = s > 0  # where every product is 0 both are exact
    if not live.any():
        return 0.0
    fp32 = float(np.median(chain[live] / s[live]))
    route = float(np.median(route[live] / s[live]))
    return route / fp32 if fp32 > 0 else (0.0 if route == 0 else math.inf)


def _chain_variance(p: np.ndarray) -> np.ndarray:
    """Return an SGEMM's V at the sampled elements, of products p: each step's rounding or loss."""
    s = np.cumsum(p, axis=1)  # float64: the exact sums to FP32's precision and well past it
    ulp = np.maximum(np.ldexp(1.0, np.frexp(s)[1] - 24), 2.0**-149)  # |s| in [2^(E-1), 2^E)
    step = np.where(np.abs(p) < ulp / 2, p * p, ulp * ulp / 12)
    return np.where(s == 0, 0.0, step).sum(axis=1)


def _pairs(na: np.ndarray, nb: np.ndarray, m: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the sampled elements' rows and columns: the largest norms paired, then random ones."""
    top_r, top_c = _largest(na), _largest(nb)
    rand_r, rand_c = random_pairs(m, n, seed)
    return np.concatenate([np.repeat(top_r, TOP), rand_r]), np.concatenate([np.tile(top_c, TOP), rand_c])


def random_pairs(m: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the SAMPLES random elements' rows and columns of an M x N product (the seed's)."""
    rng = np.random.default_rng([seed, m, n])
    return rng.integers(0, m, SAMPLES), rng.integers(0, n, SAMPLES)


def _largest(x: np.ndarray) -> np.ndarray:
    """Return the indices of the TOP largest of `x`, largest first, ties broken by index.

    Fewer than TOP repeat in that order to TOP, so that the sample is always TOP^2 + SAMPLES.
    """
    if len(x) > TOP:  # O(len) where a sort would be O(len log len): 8192 norms a call
        cand = np.flatnonzero(x >= np.partition(x, len(x) - TOP)[len(x) - TOP])
    else:
        cand = np.arange(len(x))
    return np.resize(cand[np.argsort(-x[cand], kind="stable")][:TOP], TOP)
