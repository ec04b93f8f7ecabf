"""A differential fuzzer of the dispatch: `autotune.matmul` and stored kernels against FP64.

Cases (`Case`) are drawn a regime at a time from a seed (`draw`) and called as programs call
matmul: one after another in one process, a shape seen before coming back now and then (what a
kernel keeps between launches is checked at the next call; half the calls made twice, the second
on the short road), and in pairs on two streams. `device`
(which imports CuPy, so is not imported here) checks each result element by element within
`bound_factor`; a failure is shrunk (`shrink`) to one `autotune fuzz --repro` line; `Tally` counts.
"""

from ...core.tiers import U_TF32, U
from .case import COVERAGE, DATA, MAX_ELEMENTS, MAX_FLOP, REGIMES, Case, bound_factor
from .draw import cases, coverage, coverage_case, draw, interleave, near
from .shrink import parse_repro, repro_line, shrink
from .tally import Tally

__all__ = [
    "COVERAGE",
    "DATA",
    "MAX_ELEMENTS",
    "MAX_FLOP",
    "REGIMES",
    "U",
    "U_TF32",
    "Case",
    "Tally",
    "bound_factor",
    "cases",
    "coverage",
    "coverage_case",
    "draw",
    "interleave",
    "near",
    "parse_repro",
    "repro_line",
    "shrink",
]
