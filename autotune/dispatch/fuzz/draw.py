"""Drawing fuzz cases: random ones (`cases`) and ones that run each stored kernel (`coverage`).

`cases` draws the regimes' shapes, data and call options, reproducible from a seed; `coverage`
runs each stored kernel once in every form it can be built in.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from ...core.tiers import DEFAULT, TIERS
from ...core.types import LAYOUTS, Config, Problem
from .case import COVERAGE, DATA, MAX_ELEMENTS, MAX_FLOP, REGIMES, Case, broadcast

if TYPE_CHECKING:
    from ...kernels.limits import DeviceLimits


def _dim(rng: random.Random, lo: int, hi: int) -> int:
    """Return a size in [lo, hi] that is, as often as not, a multiple of nothing."""
    # Log-uniform, or next to a power of two or a multiple of 128 (where tiles end), or odd.
    if hi <= lo:
        return lo
    kind = rng.random()
    if kind < 0.45:
        x = round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))
    elif kind < 0.65:
        x = 2 ** rng.randint(max(0, int(math.log2(lo))), max(0, int(math.log2(hi)))) + rng.randint(-3, 3)
    elif kind < 0.85:
        x = 128 * rng.randint(1, max(1, hi // 128)) + rng.choice((-5, -3, -1, 1, 3, 7))
    else:
        x = rng.randint(lo, hi) | 1
    return min(hi, max(lo, x))


def _shape(rng: random.Random, regime: str) -> tuple[int, int, int, tuple, tuple]:
    """Return (M, N, K, lead_a, lead_b) of a regime."""
    lead_a = lead_b = ()
    if regime == "few_rows":
        m, n, k = _dim(rng, 1, 16), _dim(rng, 1, 8192), _dim(rng, 1, 8192)
    elif regime == "few_cols":
        m, n, k = _dim(rng, 1, 8192), _dim(rng, 1, 32), _dim(rng, 1, 8192)
    elif regime == "small_k":
        m, n, k = _dim(rng, 1, 3000), _dim(rng, 1, 3000), _dim(rng, 1, 16)
    elif regime == "tiny":
        m, n = _dim(rng, 1, 96), _dim(rng, 1, 96)
        k = _dim(rng, 1, 1024)
    elif regime == "general":
        m, n, k = (_dim(rng, 1, 2048) for _ in range(3))
    elif regime == "large":
        m, n, k = (_dim(rng, 1024, 4500) for _ in range(3))
    else:
        m, n, k = (_dim(rng, 1, 400) for _ in range(3))
        count = _dim(rng, 2, 48)
        if regime == "batch":
            lead_a = lead_b = (count,)
        else:  # one operand broadcast (2-D, or a batch axis of 1), or two axes broadcast crosswise
            two = _dim(rng, 2, 6)
            lead_a, lead_b = rng.choice(
                [((count,), ()), ((), (count,)), ((count,), (1,)), ((two, 1), (1, count)), ((1, count), (two, count))]
            )
    return (*_fit(m, n, k, broadcast(lead_a, lead_b)), lead_a, lead_b)


def _fit(m: int, n: int, k: int, lead: tuple[int, ...]) -> tuple[int, int, int]:
    """Return the shape shrunk (keeping its proportions) until it fits MAX_ELEMENTS and MAX_FLOP."""
    batch = math.prod(lead)
    while max(m * k, k * n, m * n) * batch > MAX_ELEMENTS or 2 * m * n * k * batch > MAX_FLOP:
        m, n, k = max(1, m * 3 // 4), max(1, n * 3 // 4), max(1, k * 3 // 4)
    return m, n, k


def _values(rng: random.Random, data: str, special: str) -> tuple[float, float]:
    """Return (alpha, beta) for the data: powers of two with integer data, so it stays exact."""
    if data == "ints":
        alpha = rng.choice((1.0, 1.0, -1.0, 0.5, 2.0, -0.25))
        beta = rng.choice((0.0, 0.0, 1.0, -1.0, 0.5, 2.0))
    else:
        alphas = (1.0, 1.0, -1.0, 0.5, 1.5, -0.75, 3.0) + (() if special else (0.0,))
        alpha = rng.choice(alphas)
        beta = rng.choice((0.0, 0.0, 0.0, 1.0, -1.0, 0.5, 3.0, -0.75))
    return alpha, beta


def draw(rng: random.Random, seen: Sequence[Case] = (), torch: bool = False) -> Case:
    """Return one case; with `seen` (the cases so far), now and then one of their shapes again."""
    if seen and rng.random() < 0.3:
        old = rng.choice(seen[-64:])
        regime, (m, n, k, lead_a, lead_b) = old.regime, (old.M, old.N, old.K, old.lead_a, old.lead_b)
        layout, precision = old.layout, old.precision
    else:
        regime = rng.choice(REGIMES)
        m, n, k, lead_a, lead_b = _shape(rng, regime)
        layout = rng.choice(LAYOUTS)
        tiers = list(TIERS.values())
        precision = rng.choices(tiers, [t.share for t in tiers])[0].name
    data = rng.choices(DATA, (40, 15, 10, 5, 30))[0]
    special = rng.choices(("", "nan", "inf"), (84, 8, 8))[0]
    alpha, beta = _values(rng, data, special)

    def some(values):
        return rng.choice(values) if rng.random() < 0.3 else 0

    return Case(
        regime, m, n, k, lead_a, lead_b, layout,
        flags=rng.random() < 0.3,
        pads=(some((1, 2, 3, 4, 7, 8)), some((1, 2, 3, 4, 7, 8)), some((1, 2, 3, 4, 7, 8))),
        offsets=(some((1, 2, 3)), some((1, 2, 3)), some((1, 2, 3))),
        c_major="col" if rng.random() < 0.15 else "row",
        out=beta != 0 or rng.random() < 0.6,
        alpha=alpha,
        beta=beta,
        data=data,
        special=special,
        precision=precision,
        kind="torch" if torch and rng.random() < 0.1 else "cupy",
        seed=rng.randrange(2**31),
    )  # fmt: skip


def cases(seed: int, count: int, torch: bool = False) -> Iterator[Case]:
    """Yield `count` cases from `seed`, the same ones on every machine."""
    # Some come in pairs on two streams (stream 1, then stream 2), half of those pairs the same
    # shape and layout (one kernel on two streams at once).
    rng = random.Random(seed)
    seen: list[Case] = []
    while len(seen) < count:
        case = draw(rng, seen, torch)
        if len(seen) + 2 <= count and rng.random() < 0.12:
            if rng.random() < 0.5:
                twin = dataclasses.replace(case, seed=rng.randrange(2**31), beta=0.0, out=True)
            else:
                twin = draw(rng, seen, torch)
            pair = [dataclasses.replace(case, stream=1, kind="cupy"), dataclasses.replace(twin, stream=2, kind="cupy")]
            seen += pair
            yield from pair
            continue
        seen.append(case)
        yield case


def near(rng: random.Random, problem: Problem, fits: Callable[[int, int, int], bool], batched: bool) -> tuple:
    """Return (M, N, K, lead) near a tuned `problem` where `fits` holds; None if none is found.

    Where `fits` does not hold at `problem` itself (a kernel a search stored for a shape its family
    is not meant for, the family named), any shape near it: the dispatcher runs the kernel there.
    """
    # Each size within a factor of two of the tuned one, a multiple of nothing in particular.
    anywhere = not fits(problem.M, problem.N, problem.K)
    for _ in range(20):
        dims = []
        for d in (problem.M, problem.N, problem.K):
            x = round(d * 2 ** rng.uniform(-1, 1)) + rng.randint(-3, 3)
            dims.append(max(1, x))
        lead = (_dim(rng, 2, 9),) if batched else ()
        m, n, k = _fit(*dims, lead)
        if anywhere or fits(m, n, k):
            return m, n, k, lead
    return None


def coverage_case(rng: random.Random, config: Config, layout: str, precision: str, shape: tuple) -> Case:
    """Return a case that runs `config`, built for `layout` (and a batch if `shape` has one)."""
    m, n, k, lead = shape
    data = rng.choices(DATA, (40, 15, 10, 5, 30))[0]
    alpha, beta = _values(rng, data, "")
    return Case(
        COVERAGE, m, n, k, lead, lead, layout,
        pads=(rng.choice((0, 0, 3)), rng.choice((0, 0, 1)), rng.choice((0, 0, 2))),
        offsets=(rng.choice((0, 0, 1)), rng.choice((0, 0, 2)), rng.choice((0, 0, 3))),
        out=True, alpha=alpha, beta=beta, data=data, precision=precision,
        config={"family": config.family, "params": config.as_dict()},
        seed=rng.randrange(2**31),
    )  # fmt: skip


def coverage(
    records: Sequence[tuple[Problem, dict]],
    extra: Sequence[tuple[Problem, Config]],
    seed: int,
    per_kernel: int,
    limits: DeviceLimits,
) -> list[Case]:
    """Return `per_kernel` cases for each kernel the dispatcher can choose, in each form it builds.

    Args:
        records: (tuned shape, its families' entries) of each stored record.
        extra: (shape, config) of each other config it may run (the fallback).
        seed: The draw's seed.
        per_kernel: How many cases each kernel gets, at shapes near its tuned one where its
            family is meant to run (anywhere near it where the tuned shape is not one).
        limits: The device's: each config is built for each layout and batching it can be
            within them, as the dispatcher builds it. Required: without them a form past the
            device's shared memory or threads would be drawn, one the dispatcher never builds,
            and reported as a kernel that fails.
    """
    from ...kernels.family import cached_family
    from ...records.results import entry_config
    from ..table import built_for

    rng = random.Random(seed ^ 0x5EED)
    sources = [(shape, entry_config(e)) for shape, fams in records for e in fams.values()] + list(extra)
    done, out = set(), []
    for tuned, config in sources:
        fam = cached_family(config.family)

        def fits(m, n, k, fam=fam):
            return not fam.unsuited(Problem(m, n, k))

        for layout in LAYOUTS:
            for batched in (False, True):
                want = Problem(1, 1, 1, layout, 2 if batched else 1, precision=tuned.precision)
                cfg = None if fam.gaps(want) else built_for(config, layout, want.batch, tuned.precision, limits)
                if cfg is None or cfg.name in done:
                    continue
                done.add(cfg.name)
                precision = str(cfg.as_dict().get("PRECISION", DEFAULT))
                for _ in range(per_kernel):
                    shape = near(rng, tuned, fits, batched)
                    if shape is not None:
                        out.append(coverage_case(rng, cfg, layout, precision, shape))
    return out


def interleave(first: Sequence[Case], second: Sequence[Case], seed: int) -> list[Case]:
    """Return `second`'s cases put among `first`'s at places drawn from `seed`, each order kept."""
    # A stream pair of `first` stays together: nothing is put between its two cases.
    rng = random.Random(seed ^ 0x1EAF)
    slots = sorted(rng.randrange(len(first) + 1) for _ in second)
    out, j = [], 0
    for i, case in enumerate(first):
        while j < len(slots) and slots[j] <= i and case.stream != 2:
            out.append(second[j])
            j += 1
        out.append(case)
    out.extend(second[j:])
    return out
