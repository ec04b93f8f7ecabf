"""The command line's argument types (numbers in their ranges, sm_XX, seconds) and the options every
shape-taking command shares; an argparse parser whose errors are one `autotune: error:` line."""

from __future__ import annotations

import argparse
import math
import re

from ..core import redact
from ..core.types import LAYOUTS, PRECISIONS, error_line
from .inputs import int_in


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        see = f"autotune {self.prog.split()[-1]} --help" if " " in self.prog else "autotune --help"
        # argparse quotes the argument it refuses, whole: masked and bounded as every error line is
        self.exit(2, f"autotune: error: {error_line(redact.text(message))} (see '{see}')\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def number(lo: float, hi: float | None = None, *, above: bool = False, below: bool = False):
    """An argparse type: a finite number from `lo` (excluded when `above`) to `hi` (excluded when
    `below`); inf, nan and anything outside are refused, not clamped."""
    bounds = f"{'>' if above else '>='} {lo:g}"
    if hi is not None:
        bounds += f" and {'below' if below else 'at most'} {hi:.12g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        inside = math.isfinite(value) and (value > lo if above else value >= lo)
        if hi is not None:
            inside = inside and (value < hi if below else value <= hi)
        if not inside:
            raise argparse.ArgumentTypeError(f"expected a number {bounds}, got {text!r}")
        return value

    return parse


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


# Seconds: at most about 31 years, below what a wait on a lock or a process accepts (threading's
# TIMEOUT_MAX, 292 years), so no value gets that far and overflows there.
MAX_SECONDS = 1e9
seconds = number(0, MAX_SECONDS)
positive_seconds = number(0, MAX_SECONDS, above=True)
# check --tolerance: the slow-down fraction allowed. A config measured at x times its recorded
# GFLOP/s has changed by x - 1 > -1, so a tolerance of 1 or more could never fail a check.
tolerance = number(0, 1, below=True)
seed = int_in(0, 2**32 - 1)  # what NumPy's and Optuna's generators take
device = int_in(0, 2**31 - 1)  # a CUDA device ordinal is a C int
MAX_WORKERS = 64  # a process each, each with its own CUDA context or replayed table


_ARCH = re.compile(r"^sm_\d+a?$")


def arch(text: str) -> str:
    if not _ARCH.match(text):
        raise argparse.ArgumentTypeError(
            f"expected sm_<digits> with an optional 'a' (e.g. sm_90, sm_90a), got {text!r}"
        )
    return text


def shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=positive_int, metavar="S", help="square problem S x S x S")
    p.add_argument("--m", type=positive_int, help="rows of op(A) and C")
    p.add_argument("--n", type=positive_int, help="columns of op(B) and C")
    p.add_argument("--k", type=positive_int, help="columns of op(A), rows of op(B)")
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="nn",
        help="how A and B are stored, as NumPy writes the product: nn A @ B (default), nt A @ B.T "
        "(B stored N x K, as a linear layer's weight), tn A.T @ B (A stored K x M), tt A.T @ B.T; "
        "a shape may also end in _nt etc.",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=1,
        metavar="B",
        help="a strided batch of B products of that shape in one launch (as cublasSgemmStridedBatched; "
        "default 1: one product); a shape may also end in _b<B>, e.g. 512_b64",
    )
    p.add_argument(
        "--beta",
        type=finite_float,
        default=0.0,
        metavar="BETA",
        help="C = A @ B + BETA * C as timed, cuBLAS with the same beta (default 0: C written, not read; "
        "any other reads C, as an epilogue that accumulates does); the record is kept apart, its name "
        "ending in _beta<BETA>, and a shape may also end so, e.g. 4096_beta3",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="highest",
        help="the accuracy a kernel must meet, with PyTorch's names: highest (default) FP32 on the CUDA "
        "cores; high: FP32's accuracy from tensor-core products of split operands (3xTF32), each "
        "candidate's errors on uniform, normal and wide-range inputs at most 1.5x cuBLAS FP32's; medium: "
        "one TF32 product, errors at most 1.5x cuBLAS TF32's (timed against it). FP32 families serve every "
        "tier; the record's name ends in _high or _medium, and a shape may also end so, e.g. 4096_high",
    )
