"""Precision tiers: each one's name, its bar, its error bounds and how it is shown.

A tier is the accuracy a kernel must meet, named as torch.set_float32_matmul_precision names it.
Everything that treats tiers apart (the runner's check, `Kernel.verify`, the fuzzer's bound and
draw, the exported header, the command line's choices and help) reads the `Tier` registered in
`TIERS`; adding a tier is one `register` call. A family without a PRECISION parameter computes
in strict FP32 and serves every tier; one that declares it serves the tiers it names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

U = 2.0**-24  # FP32 unit roundoff
U_TF32 = 2.0**-11  # TF32 (10 stored mantissa bits), to nearest

# The cuBLAS a tier is held to: FP32 gemm, or gemm with TF32 tensor-core products.
BARS = ("FP32", "TF32")


@dataclass(frozen=True)
class Tier:
    """One accuracy tier.

    Args:
        name: its name on the command line, in `Problem.precision`, a record's name ('_high')
            and a family's PRECISION values.
        bar: the cuBLAS it is checked and timed against (BARS): "FP32", or "TF32" (the larger
            of TF32 cuBLAS's errors and a true TF32 product's, and TF32 cuBLAS's time).
        contract: None for strict FP32 (checked by the verification tolerance alone); else each
            candidate's errors on the runner's contract inputs may be at most this times the bar's.
        bar_slack: where not None, the runner's alpha/beta and NaN checks accept errors up to
            this times the bar's relative error (when that is above the tolerance asked for).
        tolerance: `Kernel.verify`'s default bound on the relative error of its load-time check.
        bound: K -> the largest |C - C64| / (|alpha| |A||B| + |beta| |C0|) a correct kernel
            may have, element by element (the fuzzer's bound).
        share: its weight in the fuzzer's draw of a case's tier.
        c_name: how an exported header names it.
        help: its clause in `--precision`'s help.
    """

    name: str
    bar: str
    contract: float | None
    bar_slack: float | None
    tolerance: float
    bound: Callable[[int], float]
    share: int
    c_name: str
    help: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9]*", self.name) or re.fullmatch(r"(b\d+|beta.*|[nt][nt])", self.name):
            raise ValueError(f"tier name {self.name!r}: lower-case letters and digits, not a layout, batch or beta tag")
        if self.bar not in BARS:
            raise ValueError(f"tier {self.name}: bar {self.bar!r} is not one of {', '.join(BARS)}")

    @property
    def strict(self) -> bool:
        """Whether it is FP32 on the CUDA cores, which meets every tier's contract."""
        return self.contract is None


def _highest_bound(K: int) -> float:
    # gamma_{K+2}: K - 1 additions, alpha's product and beta's sum; every order of a sum of K
    # products has at most gamma_K (Higham, Accuracy and Stability, 3.1).
    n = (K + 2) * U
    return n / (1 - n)


def _high_bound(K: int) -> float:
    # Each product of split operands misses at most 3 * 2^-22 of |a||b| (the small parts' product
    # and the two parts' rounding), over up to 3K + 2 additions a tensor core may truncate (2u each).
    return 3.01 * 2.0**-22 + 2 * (3 * K + 4) * U


def _medium_bound(K: int) -> float:
    # 2^-9 of |a||b| for two operands rounded or truncated to TF32, then the same additions.
    return 2.0**-9 + 2 * (K + 4) * U


# Strictest first; the first is the default (a record of it has no tier in its name).
TIERS: dict[str, Tier] = {}
DEFAULT = "highest"


def register(tier: Tier) -> Tier:
    """Add `tier` after those registered and return it; ValueError if its name is taken."""
    if tier.name in TIERS:
        raise ValueError(f"tier {tier.name} is registered already")
    TIERS[tier.name] = tier
    return tier


def unregister(name: str) -> None:
    """Remove the tier `name` (not the default)."""
    if name == DEFAULT:
        raise ValueError(f"the default tier {DEFAULT} cannot be removed")
    del TIERS[name]


def tier(name: str) -> Tier:
    """Return the tier called `name`; ValueError for a name no tier has."""
    try:
        return TIERS[name]
    except KeyError:
        raise ValueError(f"unknown precision {name!r}") from None


def meets(built: str, wanted: str) -> bool:
    """Return whether a kernel built for tier `built` serves a problem of tier `wanted`."""
    # The same tier serves, and so does a strict one: FP32 meets every contract.
    return built == wanted or (built in TIERS and TIERS[built].strict)


def spelt_or(words: Sequence[str]) -> str:
    """Return the words as a list in prose: 'a', 'a or b', 'a, b or c'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


class _Names(Sequence):
    """The registered tiers' names in order, read when used (so a tier registered later is in)."""

    def __getitem__(self, i):
        return tuple(TIERS)[i]

    def __len__(self) -> int:
        return len(TIERS)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(TIERS))

    def __contains__(self, name: object) -> bool:
        return name in TIERS

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) and not isinstance(other, str) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(tuple(TIERS))


PRECISIONS: Sequence[str] = _Names()

register(
    Tier(
        "highest",
        bar="FP32",
        contract=None,
        bar_slack=None,
        tolerance=1e-4,
        bound=_highest_bound,
        share=70,
        c_name="strict-FP32",
        help="FP32 on the CUDA cores",
    )
)
# `high` is a contract, not a method: any family that meets it serves it. Beside 3xTF32 (mma_tf32,
# wgmma_tf32), Ozaki scheme II on the INT8 tensor cores is to serve it too (kernels/ozaki.py, the
# algorithm in NumPy; kernels/ozaki_guard.py, how many moduli a call's inputs need), chosen per
# shape by measurement like any other family, so no new tier. Such a family declares
#     PRECISION: {choices: [high], default: high}
#     METHOD: {choices: [ozaki-int8], default: ozaki-int8}   # what a record shows it computed with
#     MODULI: {domain: [6, 8], doc: "INT8 GEMMs: each adds about 8 bits to the product's range"}
# and the runner's contract check holds it to this tier's numbers as it holds 3xTF32. A call whose
# inputs need more moduli than the kernel has (ozaki_guard.admit returns OTHER) runs 3xTF32.
register(
    Tier(
        "high",
        bar="FP32",
        contract=1.5,
        bar_slack=None,
        tolerance=1e-4,
        bound=_high_bound,
        share=15,
        c_name="FP32-accurate tensor-core (precision high: 3xTF32 products, errors within 1.5x FP32 cuBLAS's)",
        help="FP32's accuracy from tensor-core products of split operands (3xTF32), each candidate's errors on "
        "uniform, normal and wide-range inputs at most 1.5x cuBLAS FP32's",
    )
)
register(
    Tier(
        "medium",
        bar="TF32",
        contract=1.5,
        bar_slack=3.0,
        tolerance=2e-3,
        bound=_medium_bound,
        share=15,
        c_name="TF32 tensor-core (precision medium: one TF32 product, errors within 1.5x TF32 cuBLAS's)",
        help="one TF32 product, errors at most 1.5x cuBLAS TF32's (timed against it)",
    )
)
