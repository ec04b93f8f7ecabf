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

from .family import TEMPLATE_DIR
from .ozaki import moduli, norm_bits
from .render import render_template, template

SCALE_TEMPLATE = "_ozaki_scale.cu.j2"
CRT_TEMPLATE = "_ozaki_crt.cu.j2"
SCALE_KERNEL = "autotune_ozaki_scale"
CRT_KERNEL = "autotune_ozaki_crt"

# The residue planes' rows are padded to 16 bytes: the INT8 GEMM's 16-byte loads need the pitch.
ROW_ALIGN = 16
# The tiles of the kernels: the sum-of-squares kernel's block is (32, 8); the residue kernel's tile 32
# vectors x 128 of K (16 of K a thread: one 16-byte store a plane); the reconstruction's block 32
# columns x 8 rows.
EXP_BLOCK = (32, 8, 1)
RES_TILE = (32, 128)
CRT_BLOCK = (32, 8)


def residue_pitch(k: int) -> int:
    """Return the bytes between rows of a residue plane for depth `k` (k rounded up to 16)."""
    return -(-k // ROW_ALIGN) * ROW_ALIGN


def scale_source(n: int, name: str = SCALE_KERNEL) -> str:
    """Return the CUDA source of the scaling pass for `n` moduli: `<name>_exp` and `<name>_res`."""
    return render_template(template(TEMPLATE_DIR, SCALE_TEMPLATE), NAME=name, MODULI=list(moduli(n)), H=norm_bits(n))


def exp_chunk(v: int, k: int, kmajor: bool, sms: int) -> int:
    """Return the depth of K each block of the sum-of-squares kernel takes (a multiple of 256).

    K is cut into chunks until there are about four blocks an SM, where vectors alone are too few
    (B's 8192 columns make 256 blocks of 32): no chunk under 256 deep, where a block's sums would
    cost more to merge than to make.

    Args:
        v, k: the vectors and their length.
        kmajor: whether a vector is contiguous (8 vectors a block, else 32).
        sms: the device's SMs.
    """
    blocks = -(-v // (8 if kmajor else 32))
    chunks = max(1, min(-(-4 * sms // blocks), k // 256))
    depth = -(-k // chunks)
    return max(256, -(-depth // 256) * 256)


def exp_grid(v: int, k: int, kmajor: bool, chunk: int) -> tuple[int, int, int]:
    """Return the sum-of-squares kernel's grid: blocks of 8 or 32 vectors (x) by chunks of K (y)."""
    per = 8 if kmajor else 32
    return (-(-v // per), max(1, -(-k // chunk)), 1)


def res_grid(v: int, k: int) -> tuple[int, int, int]:
    """Return the residue kernel's grid: tiles of 128 along the padded K (x), of 32 vectors (y)."""
    return (-(-residue_pitch(k) // RES_TILE[1]), -(-v // RES_TILE[0]), 1)


@dataclass(frozen=True)
class CrtConstants:
    """Garner's constants for n moduli and P's limbs.

    Args:
        coef: per modulus i, (m_0 ... m_{j-1}) mod m_i for each j < i.
        inv: per modulus i, (m_0 ... m_{i-1})^-1 mod m_i (1 for i = 0).
        limbs: 32-bit limbs holding any x < P.
        half: P // 2 in limbs, least significant first.
        whole: P in limbs.
    """

    coef: tuple[tuple[int, ...], ...]
    inv: tuple[int, ...]
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
    limbs = -(-p.bit_length() // 32)
    return CrtConstants(coef, inv, limbs, _limbs(p // 2, limbs), _limbs(p, limbs))


def garner(parts: list[int], n: int) -> int:
    """Return x in [0, P) from its residues, as the reconstruction kernel computes it."""
    c, ms = crt_constants(n), moduli(n)
    v: list[int] = []
    for i, r in enumerate(parts):
        t = r - sum(v[j] * c.coef[i][j] for j in range(i))
        v.append((t % ms[i]) * c.inv[i] % ms[i])
    x = 0
    for i in range(n - 1, -1, -1):
        x = x * ms[i] + v[i]
    return x


def crt_source(n: int, name: str = CRT_KERNEL) -> str:
    """Return the CUDA source of the reconstruction for `n` moduli (kernel `name`)."""
    c = crt_constants(n)
    return render_template(
        template(TEMPLATE_DIR, CRT_TEMPLATE),
        NAME=name,
        MODULI=list(moduli(n)),
        COEF=[list(x) for x in c.coef],
        INV=list(c.inv),
        LIMBS=c.limbs,
        HALF=[f"{x}u" for x in c.half],
        WHOLE=[f"{x}u" for x in c.whole],
    )


def crt_grid(m: int, n: int) -> tuple[int, int, int]:
    """Return the reconstruction's grid for an M x N C: 32 columns (x) by 8 rows (y) a block."""
    return (-(-n // CRT_BLOCK[0]), -(-m // CRT_BLOCK[1]), 1)
