"""The Ozaki route's elementwise guarantee: every element of C within the tier's bound, worst case.

The check (ozaki_guard) models the route's error at a sample of C; an element it does not see can
be off by more than the tier's elementwise bound (the fuzzer's) where a row's magnitudes spread
widely. This bounds every element from what the route can afford. The scaling rounds a_ik 2^e_i
to an integer, off by at most 1/2, so before C's own rounding C_ij is off by at most
g_i |b_j|_1 + h_j |a_i|_1 + g_i h_j K (g_i = 2^-e_i / 2, h_j = 2^-f_j / 2): per-vector 1-norms.
And |A||B| is bounded below by the magnitudes rounded down to QBITS bits a vector, multiplied
exactly over a subset of K (one INT8 GEMM of K / stride more on the device). A count passes where
the first stays within the tier's bound of the second at every element. The NumPy form here, and
the device kernels' source (templates/_ozaki_element.cu.j2; gpu/ozaki_element.py runs them).
"""

from __future__ import annotations

import numpy as np

from ..core.tiers import U, tier
from . import ozaki
from .family import TEMPLATE_DIR
from .render import render_template, template

QBITS = 7  # magnitudes as 0..127: an INT8 GEMM's operands, INT32 sums exact to K of 2^17
ELEMENT_KERNEL = "autotune_ozaki_element"
ELEMENT_TEMPLATE = "_ozaki_element.cu.j2"
ELEMENT_THREADS = 256
RUN = 32  # the floor's subset of K comes in runs of 32 k's: a 128-byte line of FP32 along K


def stride(k: int) -> int:
    """Return the floor's stride at depth `k`: it multiplies every stride-th run of RUN k's.

    Any subset of the K products bounds |A||B| from below, and costs as much less as it leaves out;
    a dense row's floor shrinks about as much, which the tier's bound (about 6 K u) affords at the
    counts the check admits where K / stride stays at 1024 or more (measured in NumPy on every
    contract kind; "wide" inputs at K = 1024 would need all of K).
    """
    return max(1, min(8, k // 1024))


def subset(k: int, r: int) -> np.ndarray:
    """Return the k's the floor multiplies at stride `r`: those of every r-th run of RUN."""
    ks = np.arange(k)
    return ks[(ks // RUN) % r == 0]


def element_source() -> str:
    """Return the device kernels' source: ELEMENT_KERNEL + _q and _judge."""
    src = template(TEMPLATE_DIR, ELEMENT_TEMPLATE)
    return render_template(src, NAME=ELEMENT_KERNEL, QBITS=QBITS, THREADS=ELEMENT_THREADS, RUN=RUN)


def magnitudes(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (q, s): |x| 2^s_v rounded down to integers below 2^QBITS, vector v along `axis`.

    So |x| >= q 2^-s element by element. `axis` 1 takes x's rows (op(A)), 0 its columns (op(B)).
    """
    mag = np.abs(np.asarray(x, np.float64))
    top = mag.max(axis=axis, initial=0.0)
    _, ex = np.frexp(np.where(top > 0, top, 1.0))  # top < 2^ex
    s = (QBITS - ex).astype(np.int64)
    scale = np.expand_dims(s, axis)
    return np.floor(np.ldexp(mag, scale)).astype(np.int64), s


def magnitude_floor(a: np.ndarray, b: np.ndarray, r: int = 1) -> np.ndarray:
    """Return L (float64, M x N) with L_ij <= sum_k |a_ik| |b_kj|, from QBITS-bit magnitudes.

    Args:
        r: the stride: the sum over subset(K, r) alone.
    """
    qa, sa = magnitudes(a, 1)
    qb, sb = magnitudes(b, 0)
    ks = subset(qa.shape[1], r)
    return np.ldexp((qa[:, ks] @ qb[ks, :]).astype(np.float64), -(sa[:, None] + sb[None, :]))


def worst_error(a: np.ndarray, b: np.ndarray, e: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Return the largest |C_ij - (AB)_ij| the route can make before C's rounding (at e, f)."""
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    k = a64.shape[1]
    g, h = np.ldexp(0.5, -e)[:, None], np.ldexp(0.5, -f)[None, :]
    return g * b64.sum(axis=0)[None, :] + h * a64.sum(axis=1)[:, None] + g * h * k


def holds(a: np.ndarray, b: np.ndarray, n: int, r: int | None = None) -> bool:
    """Return whether `n` moduli keep every element of C within the tier's elementwise bound.

    Worst case, whatever the signs: (alpha, beta scale both sides alike, and C's one rounding to
    FP32 takes U of the bound.) Where some |A||B|_ij is 0 but its row and column are not, the
    bound cannot show the route exact there: False. `r`: the floor's stride (stride(K) when None).

    Example:
        a, b = operands("uniform", 64, 4096, 48, rng)
        holds(a, b, 7)  # True; "wide" inputs at K = 16: False at any count
    """
    k = np.asarray(a).shape[1]
    if not ozaki.fits(n, k):
        return False
    s = ozaki.scale(a, b, n)
    limit = (tier("high").bound(k) - U) * magnitude_floor(a, b, stride(k) if r is None else r)
    return bool((worst_error(a, b, s.e, s.f) <= limit).all())
