"""A fuzz case (`Case`): one call of the dispatch as a plain record, and the bound it is held to.

A case is JSON on one line, every field checked as input; `bound_factor` is the rounding bound
its result is held to.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ...core.tiers import DEFAULT, tier
from ...core.types import LAYOUTS, PRECISIONS, Config, Problem, UserError

REGIMES = ("few_rows", "few_cols", "small_k", "tiny", "general", "large", "batch", "broadcast")
DATA = ("uniform", "normal", "wide", "positive", "ints")
COVERAGE = "coverage"  # the regime label of cases that run one stored kernel

# What the device is asked to hold for one case: operands and reference stay far below a
# card's memory and the FP64 reference's work below a few milliseconds.
MAX_ELEMENTS = 1 << 24  # of any one operand or of C (with its batch)
MAX_FLOP = 1 << 35  # 2 * M * N * K * batch


@dataclass(frozen=True)
class Case:
    """One call: C = alpha * op(A) @ op(B) + beta * C0, how its arrays lie and what it runs on."""

    regime: str
    M: int
    N: int
    K: int
    lead_a: tuple[int, ...] = ()  # batch axes of A; broadcast against lead_b as cupy.matmul does
    lead_b: tuple[int, ...] = ()
    layout: str = "nn"  # how A and B are stored: "tn" is A stored K x M
    flags: bool = False  # pass the stored operands with trans_a / trans_b, not as transposed views
    pads: tuple[int, int, int] = (0, 0, 0)  # floats past each stored row of A, B and C
    offsets: tuple[int, int, int] = (0, 0, 0)  # floats before each one's first element
    c_major: str = "row"  # "col": out is column-major (C^T row-major)
    out: bool = True  # False: matmul allocates C (beta is 0 then)
    alpha: float = 1.0
    beta: float = 0.0
    data: str = "uniform"
    special: str = ""  # "nan" or "inf": a few of them in A and B (and in C0 when it is read)
    precision: str = DEFAULT
    stream: int = 0  # 0: CuPy's current stream; 1 and 2: a pair of streams running at once
    kind: str = "cupy"  # "torch": the arrays are torch tensors (when torch is installed)
    config: dict | None = None  # {"family", "params"}: run this kernel (autotune.load) instead of matmul
    seed: int = 0

    def __post_init__(self) -> None:
        _check_case(self)

    @property
    def lead(self) -> tuple[int, ...]:
        """The batch axes of C."""
        return broadcast(self.lead_a, self.lead_b)

    @property
    def batch(self) -> int:
        return math.prod(self.lead)

    @property
    def exact(self) -> bool:
        """Integer data: the FP32 (and TF32) result must equal the exact one."""
        return self.data == "ints"

    @property
    def kernel(self) -> Config | None:
        """The stored config the case runs through autotune.load (None: through matmul)."""
        return None if self.config is None else Config.make(self.config["family"], self.config["params"])

    @property
    def problem(self) -> Problem:
        return Problem(self.M, self.N, self.K, self.layout, self.batch, self.beta, self.precision)

    def to_json(self) -> dict:
        """The fields that differ from their defaults (a short line to paste back)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("regime", "M", "N", "K") or value != f.default:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, d: dict) -> Case:
        """Return the case a JSON object (as `to_json` writes it) describes; else UserError."""
        if not isinstance(d, dict):
            raise UserError(f"a case must be a JSON object, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise UserError(f"a case has unknown fields: {', '.join(unknown)}")
        d = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        try:
            return cls(**d)
        except TypeError as exc:
            raise UserError(f"a case is missing fields ({exc})") from None


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Return batch axes `a` and `b` broadcast together, as cupy.matmul does; else UserError."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise UserError(f"batch axes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_case(c: Case) -> None:
    """Raise UserError unless every field is in its range: a case from a command line is input."""
    problems = []
    if c.regime not in (*REGIMES, COVERAGE):
        problems.append(f"regime {c.regime!r}")
    for name in ("M", "N", "K", "seed"):
        v = getattr(c, name)
        if not _int(v) or v < (0 if name == "seed" else 1) or v > Problem.MAX_DIM:
            problems.append(f"{name} {v!r}")
    for name in ("lead_a", "lead_b"):
        v = getattr(c, name)
        if not isinstance(v, tuple) or len(v) > 3 or not all(_int(x) and 1 <= x <= 4096 for x in v):
            problems.append(f"{name} {v!r}")
    for name in ("pads", "offsets"):
        v = getattr(c, name)
        if not isinstance(v, tuple) or len(v) != 3 or not all(_int(x) and 0 <= x <= 64 for x in v):
            problems.append(f"{name} {v!r}")
    for name, allowed in (
        ("layout", LAYOUTS),
        ("c_major", ("row", "col")),
        ("data", DATA),
        ("special", ("", "nan", "inf")),
        ("precision", PRECISIONS),
        ("stream", (0, 1, 2)),
        ("kind", ("cupy", "torch")),
        ("flags", (False, True)),
        ("out", (False, True)),
    ):
        if getattr(c, name) not in allowed or type(getattr(c, name)) is not type(allowed[0]):
            problems.append(f"{name} {getattr(c, name)!r}")
    for name in ("alpha", "beta"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > 1e6:
            problems.append(f"{name} {v!r}")
    if c.config is not None and not (isinstance(c.config, dict) and {"family", "params"} <= set(c.config)):
        problems.append("config (expected {'family': ..., 'params': {...}})")
    if problems:
        raise UserError("a case with bad fields: " + "; ".join(problems))
    if c.beta != 0 and not c.out:
        raise UserError("a case with beta != 0 needs out (C is read)")
    broadcast(c.lead_a, c.lead_b)


def bound_factor(precision: str, K: int) -> float:
    """Return the largest |C - C64| / (|alpha| |A||B| + |beta| |C0|) a correct kernel may have.

    Element by element, whatever order it sums in: the `bound` of the tier `precision`
    (`core.tiers`) at `K`; ValueError for a precision no tier has.
    """
    return tier(precision).bound(K)


def is_valid(case: Case) -> bool:
    """Return whether every field of `case` is in its range."""
    try:
        _check_case(case)
    except UserError:
        return False
    return True
