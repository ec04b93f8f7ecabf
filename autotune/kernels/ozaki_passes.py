"""The scaling and reconstruction kernels of Ozaki scheme II, rendered for a number of moduli.

templates/_ozaki_scale.cu.j2 (op(A)'s rows or op(B)'s columns to each modulus's int8 residues, as
kernels/ozaki.py's `scale` and `residues`) and templates/_ozaki_crt.cu.j2 (the INT8 GEMMs' residues
back to FP32 by the CRT, as `crt` and the end of `gemm`). Not families: no declaration, no search;
gpu/ozaki.py runs them around kernels/ozaki_int8.py's GEMM.

The scaling pass reads X once and writes every modulus's residues in that pass: 4 + n bytes an
element moved (a float in, n int8 out), where a pass per modulus would read X n times (5 n bytes
an element: 40 against 12 at n = 8). Its exponents take one more read of X (the norms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .family import TEMPLATE_DIR
from .ozaki import moduli, norm_bits
from .render import render_template, template

SCALE_TEMPLATE = "_ozaki_scale.cu.j2"
CRT_TEMPLATE = "_ozaki_crt.cu.j2"
SCALE_KERNEL = "autotune_ozaki_scale"
CRT_KERNEL = "autotune_ozaki_crt"

# The residue planes' rows are padded to 16 bytes: the INT8 GEMM's 16-byte loads need the pitch.
ROW_ALIGN = 16
# The blocks of the kernels: the sum-of-squares kernel's is (32, 8); the residue kernel for contiguous
# vectors takes 4 of K a thread, (64, 4) threads a block (256 of K by 4 vectors); the one for strided
# vectors a tile of 32 vectors x 128 of K; the reconstruction 4 columns a thread, 64 x 4 threads.
EXP_BLOCK = (32, 8, 1)
RESK_BLOCK = (64, 4, 1)
REST_TILE = (32, 128)
CRT_BLOCK = (64, 4, 1)
GRID_Y = 65535  # CUDA's limit on gridDim.y: the kernels loop over what a grid this tall leaves


def residue_pitch(k: int) -> int:
    """Return the bytes between rows of a residue plane for depth `k` (k rounded up to 16)."""
    return -(-k // ROW_ALIGN) * ROW_ALIGN


def scale_source(n: int, name: str = SCALE_KERNEL, stats: bool = False) -> str:
    """Return the scaling pass's source for `n` moduli: `<name>_` sq, exp, resk and rest.

    Args:
        stats: the sum-of-squares pass also makes each vector's 1-norm and largest magnitude (the
            check's pass, for the elementwise guarantee); else it writes NaN 1-norms.
    """
    ms, h = moduli(n), norm_bits(n)
    # The float residues need |x / m| < 2^22 for every |x| <= 2^H: 7 moduli or fewer.
    float_res = 2**h < 2**22 * min(ms)
    env = {"NAME": name, "MODULI": list(ms), "H": h, "FLOAT_RES": float_res, "STATS": stats}
    return render_template(template(TEMPLATE_DIR, SCALE_TEMPLATE), **env)


def float_residue(x: int, m: int) -> int:
    """Return the kernel's float residue of `x` mod `m` (|x / m| < 2^22), as an int8.

    The kernel's at_fres: q = x / m rounded once to an integer (ties to even) with 1/m a float32,
    r = x - m q exact, the same again on r; the result's low byte.
    """
    inv = Fraction(float(np.float32(1.0) / np.float32(m)))
    r = x - m * round(x * inv)
    r -= m * round(r * inv)
    return (r + 128) % 256 - 128


def exp_chunk(v: int, k: int, kmajor: bool, sms: int) -> int:
    """Return the depth of K each block of the sum-of-squares kernel takes (a multiple of 256).

    K is cut into chunks until there are about eight blocks an SM (a full SM of 256-thread blocks:
    the loads in flight that the memory needs), where vectors alone are too few (B's 8192 columns
    make 256 blocks of 32): no chunk under 256 deep, where a block's sums would cost more to merge
    than to make.

    Args:
        v, k: the vectors and their length.
        kmajor: whether a vector is contiguous (8 vectors a block, else 32).
        sms: the device's SMs.
    """
    blocks = -(-v // (8 if kmajor else 32))
    chunks = max(1, min(-(-8 * sms // blocks), k // 256))
    depth = -(-k // chunks)
    return max(256, -(-depth // 256) * 256)


def exp_grid(v: int, k: int, kmajor: bool, chunk: int) -> tuple[int, int, int]:
    """Return the sum-of-squares kernel's grid: blocks of 8 or 32 vectors (x) by chunks of K (y)."""
    per = 8 if kmajor else 32
    return (-(-v // per), max(1, -(-k // chunk)), 1)


def res_grid(v: int, k: int, kmajor: bool) -> tuple[int, int, int]:
    """Return the residue kernel's grid: along the padded K (x) by groups of vectors (y).

    Args:
        v, k: the vectors and their length.
        kmajor: whether a vector is contiguous (`_resk`: 256 of K by 4 vectors a block), else
            `_rest` (tiles of 128 of K by 32 vectors).
    """
    along, per = (4 * RESK_BLOCK[0], RESK_BLOCK[1]) if kmajor else (REST_TILE[1], REST_TILE[0])
    return (-(-residue_pitch(k) // along), min(GRID_Y, -(-v // per)), 1)


@dataclass(frozen=True)
class CrtConstants:
    """Garner's constants for n moduli and P's limbs.

    Args:
        coef: per modulus i, (m_0 ... m_{j-1}) mod m_i for each j < i.
        inv: per modulus i, (m_0 ... m_{i-1})^-1 mod m_i (1 for i = 0).
        neg: per modulus i, -coef[i][j] inv[i] mod m_i: digit i is (r_i inv_i + sum_j v_j neg_ij) mod m_i.
        limbs: 32-bit limbs holding any x < P.
        half: P // 2 in limbs, least significant first.
        whole: P in limbs.
    """

    coef: tuple[tuple[int, ...], ...]
    inv: tuple[int, ...]
    neg: tuple[tuple[int, ...], ...]
    limbs: int
    half: tuple[int, ...]
    whole: tuple[int, ...]


def _limbs(x: int, count: int) -> tuple[int, ...]:
    """Return `x` as `count` 32-bit limbs, least significant first."""
    return tuple((x >> (32 * q)) & 0xFFFFFFFF for q in range(count))


def crt_constants(n: int) -> CrtConstants:
    """Return Garner's constants for the first `n` moduli."""
    ms = moduli(n)
    p = math.prod(ms)
    prefix = [math.prod(ms[:j]) for j in range(n)]
    coef = tuple(tuple(prefix[j] % ms[i] for j in range(i)) for i in range(n))
    inv = tuple(pow(prefix[i] % ms[i], -1, ms[i]) if i else 1 for i in range(n))
    neg = tuple(tuple(-c * inv[i] % ms[i] for c in coef[i]) for i in range(n))
    limbs = -(-p.bit_length() // 32)
    return CrtConstants(coef, inv, neg, limbs, _limbs(p // 2, limbs), _limbs(p, limbs))


def garner(parts: list[int], n: int) -> int:
    """Return x in [0, P) from its residues, as the reconstruction kernel computes it."""
    c, ms = crt_constants(n), moduli(n)
    v: list[int] = []
    for i, r in enumerate(parts):
        t = r * c.inv[i] + sum(v[j] * c.neg[i][j] for j in range(i))  # below 2^21: 32-bit on the device
        v.append(t % ms[i])
    x = 0
    for i in range(n - 1, -1, -1):
        x = x * ms[i] + v[i]
    return x


def crt_source(n: int, name: str = CRT_KERNEL) -> str:
    """Return the CUDA source of the reconstruction for `n` moduli (kernel `name`)."""
    c, p = crt_constants(n), math.prod(moduli(n))
    return render_template(
        template(TEMPLATE_DIR, CRT_TEMPLATE),
        NAME=name,
        MODULI=list(moduli(n)),
        INV=list(c.inv),
        NEG=[list(x) for x in c.neg],
        LIMBS=c.limbs,
        WIDE=p < 2**64,
        HALF64=p // 2,
        WHOLE64=p,
        HALF=[f"{x}u" for x in c.half],
        WHOLE=[f"{x}u" for x in c.whole],
    )


def crt_grid(m: int, n: int) -> tuple[int, int, int]:
    """Return the reconstruction's grid for an M x N C: 256 columns (x) by 4 rows (y) a block."""
    return (-(-n // (4 * CRT_BLOCK[0])), min(GRID_Y, -(-m // CRT_BLOCK[1])), 1)
