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
as `autotune fuzz --repro '<json>'`. This module draws, bounds and shrinks; `autotune.gpu.fuzzing`
runs cases on the device.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ..core.types import LAYOUTS, PRECISIONS, Config, Problem, UserError

U = 2.0**-24  # FP32 unit roundoff
U_TF32 = 2.0**-11  # TF32 (10 stored mantissa bits), to nearest

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
    precision: str = "highest"
    stream: int = 0  # 0: CuPy's current stream; 1 and 2: a pair of streams running at once
    kind: str = "cupy"  # "torch": the arrays are torch tensors (when torch is installed)
    config: dict | None = None  # {"family", "params"}: run this kernel (autotune.load) instead of matmul
    seed: int = 0

    def __post_init__(self) -> None:
        _check_case(self)

    @property
    def lead(self) -> tuple[int, ...]:
        """The batch axes of C."""
        return _broadcast(self.lead_a, self.lead_b)

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


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
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
    """A case read from a command line is input: every field in its range."""
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
    _broadcast(c.lead_a, c.lead_b)


def bound_factor(precision: str, K: int) -> float:
    """The largest |C - C64| / (|alpha| |A||B| + |beta| |C0|) a correct kernel of `precision` can
    have, element by element, whatever order it sums in.

    highest: gamma_{K+2} (K - 1 additions, alpha's product and beta's sum; every order of a sum
    of K products has at most gamma_K, Higham, Accuracy and Stability, 3.1). high (3xTF32): each
    product of split operands misses at most 3 * 2^-22 of |a||b| (the small parts' product and
    the two parts' rounding), over up to 3K + 2 additions that a tensor core may truncate (2u
    each). medium (one TF32 product): 2^-9 of |a||b| for two operands rounded or truncated to
    TF32, then the same additions."""
    if precision == "highest":
        n = (K + 2) * U
        return n / (1 - n)
    if precision == "high":
        return 3.01 * 2.0**-22 + 2 * (3 * K + 4) * U
    if precision == "medium":
        return 2.0**-9 + 2 * (K + 4) * U
    raise ValueError(f"unknown precision {precision!r}")


# ---- drawing -------------------------------------------------------------------------------------


def _dim(rng: random.Random, lo: int, hi: int) -> int:
    """A size in [lo, hi] that is, as often as not, a multiple of nothing: log-uniform, or next
    to a power of two or a multiple of 128 (where tiles end), or odd."""
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
    """(M, N, K, lead_a, lead_b) of a regime."""
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
    return (*_fit(m, n, k, _broadcast(lead_a, lead_b)), lead_a, lead_b)


def _fit(m: int, n: int, k: int, lead: tuple[int, ...]) -> tuple[int, int, int]:
    """The shape shrunk (keeping its proportions) until it fits MAX_ELEMENTS and MAX_FLOP."""
    batch = math.prod(lead)
    while max(m * k, k * n, m * n) * batch > MAX_ELEMENTS or 2 * m * n * k * batch > MAX_FLOP:
        m, n, k = max(1, m * 3 // 4), max(1, n * 3 // 4), max(1, k * 3 // 4)
    return m, n, k


def _values(rng: random.Random, data: str, special: str) -> tuple[float, float]:
    """(alpha, beta) for the data: powers of two with integer data, so the result stays exact."""
    if data == "ints":
        alpha = rng.choice((1.0, 1.0, -1.0, 0.5, 2.0, -0.25))
        beta = rng.choice((0.0, 0.0, 1.0, -1.0, 0.5, 2.0))
    else:
        alphas = (1.0, 1.0, -1.0, 0.5, 1.5, -0.75, 3.0) + (() if special else (0.0,))
        alpha = rng.choice(alphas)
        beta = rng.choice((0.0, 0.0, 0.0, 1.0, -1.0, 0.5, 3.0, -0.75))
    return alpha, beta


def draw(rng: random.Random, seen: Sequence[Case] = (), torch: bool = False) -> Case:
    """One case; with `seen` (the cases so far), now and then one of their shapes again."""
    if seen and rng.random() < 0.3:
        old = rng.choice(seen[-64:])
        regime, (m, n, k, lead_a, lead_b) = old.regime, (old.M, old.N, old.K, old.lead_a, old.lead_b)
        layout, precision = old.layout, old.precision
    else:
        regime = rng.choice(REGIMES)
        m, n, k, lead_a, lead_b = _shape(rng, regime)
        layout = rng.choice(LAYOUTS)
        precision = rng.choices(PRECISIONS, (70, 15, 15))[0]
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
    """`count` cases from `seed`, the same ones on every machine: some in pairs on two streams
    (stream 1, then stream 2), half of those pairs the same shape and layout (one kernel on two
    streams at once)."""
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
    """(M, N, K, lead) near a tuned `problem` (each size within a factor of two, a multiple of
    nothing in particular) where `fits` holds, for the kernel tuned there; None if none is found."""
    for _ in range(20):
        dims = []
        for d in (problem.M, problem.N, problem.K):
            x = round(d * 2 ** rng.uniform(-1, 1)) + rng.randint(-3, 3)
            dims.append(max(1, x))
        lead = (_dim(rng, 2, 9),) if batched else ()
        m, n, k = _fit(*dims, lead)
        if fits(m, n, k):
            return m, n, k, lead
    return None


def coverage_case(rng: random.Random, config: Config, layout: str, precision: str, shape: tuple) -> Case:
    """A case that runs `config` (built for `layout`, a batch when `shape` has a batch axis)."""
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
    limits=None,
) -> list[Case]:
    """`per_kernel` cases for each kernel the dispatcher can choose: each stored entry (`records`:
    (tuned shape, its families' entries)) and each `extra` config (the fallback), built for each
    layout and batching it can be (within the device's `limits`, as the dispatcher builds them),
    at shapes near its tuned one where its family is meant to run."""
    from ..records.results import entry_config
    from .api import _family, built_for

    rng = random.Random(seed ^ 0x5EED)
    sources = [(shape, entry_config(e)) for shape, fams in records for e in fams.values()] + list(extra)
    done, out = set(), []
    for tuned, config in sources:
        fam = _family(config.family)

        def fits(m, n, k, fam=fam):
            return not fam.unsuited(Problem(m, n, k))

        for layout in LAYOUTS:
            for batched in (False, True):
                want = Problem(1, 1, 1, layout, 2 if batched else 1, precision=tuned.precision)
                cfg = None if fam.gaps(want) else built_for(config, layout, want.batch, tuned.precision, limits)
                if cfg is None or cfg.name in done:
                    continue
                done.add(cfg.name)
                precision = str(cfg.as_dict().get("PRECISION", "highest"))
                for _ in range(per_kernel):
                    shape = near(rng, tuned, fits, batched)
                    if shape is not None:
                        out.append(coverage_case(rng, cfg, layout, precision, shape))
    return out


def interleave(first: Sequence[Case], second: Sequence[Case], seed: int) -> list[Case]:
    """`second`'s cases put among `first`'s at places drawn from `seed`, each list's order kept
    (a stream pair of `first` stays together)."""
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


# ---- shrinking -----------------------------------------------------------------------------------


def _simpler(case: Case) -> Iterator[Case]:
    """Cases one step simpler than `case`, the biggest simplifications first."""
    r = dataclasses.replace
    for name, plain in (
        ("stream", 0), ("kind", "cupy"), ("special", ""), ("pads", (0, 0, 0)), ("offsets", (0, 0, 0)),
        ("c_major", "row"), ("flags", False), ("alpha", 1.0), ("out", True), ("data", "ints"),
    ):  # fmt: skip
        if getattr(case, name) != plain:
            yield r(case, **{name: plain})
    if case.beta != 0:
        yield r(case, beta=0.0)
    if case.lead_a or case.lead_b:
        yield r(case, lead_a=(), lead_b=())
    for name in ("M", "N", "K"):
        v = getattr(case, name)
        for smaller in dict.fromkeys((1, v // 2, v - 1)):
            if 1 <= smaller < v:
                yield r(case, **{name: smaller})


def shrink(history: Sequence[Case], fails: Callable[[list[Case]], bool], budget: int = 200) -> list[Case] | None:
    """The fewest calls ending in the simplest case that still fail, from a run whose last case
    failed; None when no tail of up to 128 calls fails again on fresh state (then only the whole
    run, from its seed, shows it). `fails(calls)` runs `calls` in order on fresh state and says
    whether the last is wrong. At most `budget` runs of `fails`; what is found by then is returned."""
    runs = 0

    def still(calls: list[Case]) -> bool:
        nonlocal runs
        runs += 1
        return fails(calls)

    calls = None
    for width in (0, 1, 3, 7, 15, 31, 63, 127):  # the shortest tail of the run that fails
        if runs >= budget:
            break
        tail = list(history[-1 - width :])
        if still(tail):
            calls = tail
            break
        if len(tail) == len(history):
            break
    if calls is None:
        return None
    i = 0
    while i < len(calls) - 1 and runs < budget:  # drop the calls that are not needed
        trial = calls[:i] + calls[i + 1 :]
        if still(trial):
            calls = trial
        else:
            i += 1
    progress = True
    while progress and runs < budget:  # then simplify the failing call itself
        progress = False
        for simpler in _simpler(calls[-1]):
            if runs >= budget:
                break
            if _valid(simpler) and still(calls[:-1] + [simpler]):
                calls = calls[:-1] + [simpler]
                progress = True
                break
    return calls


def _valid(case: Case) -> bool:
    try:
        _check_case(case)
    except UserError:
        return False
    return True


def repro_line(calls: Sequence[Case]) -> str:
    """The one line that runs `calls` again: `autotune fuzz --repro '<json>'`."""
    text = json.dumps([c.to_json() for c in calls], separators=(",", ":"))
    return f"autotune fuzz --repro '{text}'"


def parse_repro(text: str) -> list[Case]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"--repro: not JSON ({exc})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise UserError("--repro: expected a JSON list of cases (as a failure prints it)")
    return [Case.from_json(d) for d in data]


# ---- the tally -----------------------------------------------------------------------------------


@dataclass
class Tally:
    """Problems run and wrong, per regime, and the largest error seen as a fraction of its bound."""

    run: dict[str, int] = field(default_factory=dict)
    wrong: dict[str, int] = field(default_factory=dict)
    worst: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, case: Case, ok: bool, ratio: float, seconds: float = 0.0) -> None:
        key = case.regime if case.regime != COVERAGE else f"{COVERAGE}:{case.config['family']}"
        self.run[key] = self.run.get(key, 0) + 1
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        if not ok:
            self.wrong[key] = self.wrong.get(key, 0) + 1
        if math.isfinite(ratio):
            self.worst[key] = max(self.worst.get(key, 0.0), ratio)

    @property
    def total(self) -> int:
        return sum(self.run.values())

    @property
    def total_wrong(self) -> int:
        return sum(self.wrong.values())

    def table(self) -> str:
        rows = [f"{'regime':<22} {'problems':>9} {'wrong':>6} {'worst error / bound':>20} {'ms a problem':>13}"]
        for key in sorted(self.run):
            worst = self.worst.get(key)
            rows.append(
                f"{key:<22} {self.run[key]:>9} {self.wrong.get(key, 0):>6} "
                f"{'-' if worst is None else f'{worst:.3g}':>20} {1e3 * self.seconds[key] / self.run[key]:>13.1f}"
            )
        rows.append(f"{'total':<22} {self.total:>9} {self.total_wrong:>6}")
        return "\n".join(rows)
