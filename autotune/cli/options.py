"""The command line's argument types, the options every shape-taking command shares, its parser.

Every number is checked here, as the command line is parsed, against a bound that fits where it
goes (a C int in the kernels, an FP32 beta, a sensible count of trials that SQLite and a record
hold): a value that would fail later, after a search has run, is refused before anything starts.
The parser's errors are one `autotune: error:` line.
"""

from __future__ import annotations

import argparse
import math
import re

from ..core import redact
from ..core.tiers import DEFAULT, PRECISIONS, TIERS, spelt_or
from ..core.types import FP32_RANGE, LAYOUTS, Problem, error_line, fp32_holds
from .inputs import int_in


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one `autotune: error:` line, exit code 2."""

    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        see = f"autotune {self.prog.split()[-1]} --help" if " " in self.prog else "autotune --help"
        # argparse quotes the argument it refuses, whole: masked and bounded as every error line is
        self.exit(2, f"autotune: error: {error_line(redact.text(message))} (see '{see}')\n")


def positive_int(hi: int, bound: str):
    """Return an argparse type: an integer from 1 to `hi` (`bound` says why, when one is above)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
        if value > hi:
            raise argparse.ArgumentTypeError(f"expected a positive integer at most {hi} ({bound}), got {text!r}")
        return value

    return parse


def number(lo: float, hi: float | None = None, *, above: bool = False, below: bool = False):
    """Return an argparse type: a finite number from `lo` to `hi`; others refused, not clamped.

    `lo` is excluded when `above`, `hi` when `below`; inf and nan are refused.
    """
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


def fp32_number(text: str) -> float:
    """Argparse type: a number FP32 holds as that number (`fp32_holds`), as kernels take beta."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not fp32_holds(value):
        raise argparse.ArgumentTypeError(f"expected a finite number FP32 holds ({FP32_RANGE}), got {text!r}")
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
# A problem's sizes and batch: the kernels index with C ints (Problem.MAX_DIM).
dim = positive_int(Problem.MAX_DIM, "the largest size the kernels' int indices hold")
# Trials a family, and a dry run's sample: far more than any search measures (the largest space
# has 31 million points; a million trials take days), well inside SQLite's and a record's 64-bit
# integers. With --timeout alone the budget is as many as this too (cli/inputs.UNBOUNDED_TRIALS).
MAX_TRIALS = 10**9
trials = positive_int(MAX_TRIALS, "more than any search measures")
# Trials in flight a worker (--window), each holding a compile; and compile threads (--jobs),
# each an NVRTC compile at once: more than a machine's cores only queue, and a dry run's time
# estimate divided by a huge --jobs would let any run start without --yes.
window = positive_int(4096, "trials in flight, each holding its compile")
jobs = positive_int(256, "compile threads")


_ARCH = re.compile(r"^sm_\d+a?$")


def arch(text: str) -> str:
    """Argparse type: an architecture, sm_<digits> with an optional 'a' (sm_90, sm_90a)."""
    if not _ARCH.match(text):
        raise argparse.ArgumentTypeError(
            f"expected sm_<digits> with an optional 'a' (e.g. sm_90, sm_90a), got {text!r}"
        )
    return text


def _precision_help() -> str:
    """Return --precision's help: each registered tier's clause, then how its records are named."""
    clauses = [f"{t.name} (default) {t.help}" if t.name == DEFAULT else f"{t.name}: {t.help}" for t in TIERS.values()]
    suffixes = [f"_{name}" for name in TIERS if name != DEFAULT]
    return (
        "the accuracy a kernel must meet, with PyTorch's names: " + "; ".join(clauses) + ". FP32 families serve "
        f"every tier; the record's name ends in {spelt_or(suffixes)}, and a shape may also end so, "
        f"e.g. 4096{suffixes[0]}"
    )


def shape_args(p: argparse.ArgumentParser) -> None:
    """Add the options that say a problem: --size, --m, --n, --k, --layout, --batch, --beta, ..."""
    p.add_argument("--size", type=dim, metavar="S", help="square problem S x S x S")
    p.add_argument("--m", type=dim, help="rows of op(A) and C")
    p.add_argument("--n", type=dim, help="columns of op(B) and C")
    p.add_argument("--k", type=dim, help="columns of op(A), rows of op(B)")
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
        type=dim,
        default=1,
        metavar="B",
        help="a strided batch of B products of that shape in one launch (as cublasSgemmStridedBatched; "
        "default 1: one product); a shape may also end in _b<B>, e.g. 512_b64",
    )
    p.add_argument(
        "--beta",
        type=fp32_number,
        default=0.0,
        metavar="BETA",
        help="C = A @ B + BETA * C as timed, cuBLAS with the same beta (default 0: C written, not read; "
        "any other reads C, as an epilogue that accumulates does); the record is kept apart, its name "
        "ending in _beta<BETA>, and a shape may also end so, e.g. 4096_beta3",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULT,
        help=_precision_help(),
    )
