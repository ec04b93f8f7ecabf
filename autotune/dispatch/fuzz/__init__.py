"""A differential fuzzer of the whole dispatch: `autotune.matmul` (and every stored kernel through
`autotune.load`) against an FP64 reference, the way programs call it.

Problems are drawn regime first (few rows, few columns, small K, tiny, general, large, strided
and broadcast batches), then sizes that are multiples of nothing in particular, the layout, row
pitches and offset (unaligned) views, C row- or column-major, alpha and beta, the data (uniform,
normal, exponents spread wide, all positive, or small integers whose products and sums are exact
in FP32 and TF32), NaN and Inf in the inputs, the precision tier, `out` given or not, and the
stream. They are called one after another in one process, a shape seen before coming back now
and then (what a kernel keeps between launches is checked at the next call of any shape), and in
pairs on two streams at once, sometimes the same shape twice (one kernel on two streams).

Each result is checked element by element against the FP64 product of the same FP32 inputs:
  - NaN exactly where IEEE arithmetic puts it, each infinity with its sign;
  - integer data: exact;
  - otherwise |C - C64| <= factor(tier, K) * (|alpha| |op(A)| |op(B)| + |beta| |C0|), the
    worst-case rounding error of any order of summation (Higham's gamma_{K+2}, u = 2^-24) for
    strict FP32, and the products' own error added for the tensor-core tiers (`bound_factor`);
  - nothing written outside C (its row padding and the bytes around an offset view), and the
    inputs unchanged.

A case is a plain record (`Case`), JSON on one line; a run is reproducible from its seed, and a
failure is shrunk (`shrink`) to the fewest calls and the simplest case that still fail, printed
as `autotune fuzz --repro '<json>'`. This package draws (`draw`), bounds (`case`), shrinks
(`shrink`) and counts (`tally`); `device` (which imports CuPy, so is not imported here) runs cases
on the device.
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
