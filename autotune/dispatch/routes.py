"""The Ozaki route in the dispatch: `high` calls at a shape where a search measured it faster.

`Routed` is the kernel `matmul` gets there: FP32 GEMM on the INT8 tensor cores behind its per-call
check (gpu/ozaki_route.py), the family's kernel for what the check sends away and for what the route
does not take (a batch, an empty product, C without contiguous rows). `measure` is the search's:
the route and the family's best kernel timed in one process, cuBLAS's advantage at the shape (how
much more accurately than one FP32 chain it sums, which the check holds the route to), and the tier's
contract on each input kind. Hopper only: its INT8 GEMM is wgmma fed by the tensor memory accelerator.
"""

from __future__ import annotations

import datetime
import math
import os
import statistics

from ..core.tiers import tier
from ..core.types import Config, Problem, UserError
from ..kernels.ozaki_choice import MAX_MODULI
from ..records.fields import GUARANTEES, shown
from .kernel import Kernel

NAME = "ozaki_int8"  # the route's name in a record's "routes"
ARCHES = ("sm_90", "sm_90a")
ADVANTAGE_MAX = 1e6  # an SGEMM exact at the whole sample: the check then asks C's own rounding
_KINDS = ("uniform", "normal")  # what the advantage is measured on (the contract's kinds besides)
_SEEDS = 2


def usable(problem: Problem, arch: str) -> bool:
    """Return whether the route may serve `problem` on `arch`: `high`, one matrix, Hopper."""
    return problem.precision == "high" and problem.batch == 1 and arch in ARCHES


def enabled() -> bool:
    """Return whether matmul may take the Ozaki route: unless $AUTOTUNE_ROUTE is "off".

    Its check holds the tier's contract (normwise and median errors against cuBLAS's) and its
    elementwise guarantee holds every element of C within the tier's bound, or the call goes to
    the family's kernel. "ozaki" (once the opt-in) and unset or "" alike take it where faster.

    Raises:
        UserError: any other value.
    """
    value = os.environ.get("AUTOTUNE_ROUTE", "")
    if value not in ("", "ozaki", "off"):
        raise UserError(f"AUTOTUNE_ROUTE must be 'off', 'ozaki' or unset, not {shown(value)}")
    return value != "off"


def faster(entry: dict | None) -> bool:
    """Return whether a record's route entry measured faster than the family's best beside it.

    Only an entry timed with the elementwise guarantee counts: one timed before it ran without
    that cost, and `search --precision high` times the route again.
    """
    return entry is not None and entry.get("guarantee") in GUARANTEES and entry["time_ms"] < entry["versus_ms"]


_ROUTES: dict[int, object] = {}


def _route(dev: int):
    """Return the device's OzakiRoute (one for every shape: its engines and check loaded once)."""
    if dev not in _ROUTES:
        from ..gpu.ozaki_route import OzakiRoute

        _ROUTES[dev] = OzakiRoute(MAX_MODULI, element=True)  # every element within the tier's bound
    return _ROUTES[dev]


class Routed:
    """The Ozaki route where a record says it is faster, `kernel` behind it: called as a Kernel is.

    Args:
        kernel: the family's kernel for the shape (the fallback).
        advantage: the check's, as the record measured it of cuBLAS at the shape.
        dev: the device.
        note: what chose the route, shown in the repr.
    """

    routed = True  # matmul keeps no torch shortcut of it (a shortcut launches one kernel)

    def __init__(self, kernel: Kernel, advantage: float, dev: int, note: str = ""):
        self.kernel, self.advantage, self.dev = kernel, float(advantage), dev
        self.config, self.layout, self.precision = kernel.config, kernel.layout, kernel.precision
        self.batched, self.family = kernel.batched, kernel.family
        self.source = f"the Ozaki route{note}, else {kernel.config.name} ({kernel.source})"
        self.route = _route(dev)

    def __repr__(self) -> str:
        return f"<autotune.Routed ozaki_int8 ({self.source})>"

    __call__ = Kernel.__call__  # the same placement; then this class's _launch

    def _launch(self, ops, alpha: float, beta: float):
        c = ops.c  # a column-major C is the kernel's (it writes C^T = op(B)^T op(A)^T)
        if ops.batch != 1 or min(ops.M, ops.N, ops.K) == 0 or c.shape != (ops.M, ops.N) or c.strides[1] != 4:
            return self.kernel._launch(ops, alpha, beta)

        def fallback(*_):  # C untouched: the family's kernel takes the call whole
            self.kernel._launch(ops, alpha, beta)

        with ops.stream:
            self.route(ops.a, ops.b, alpha, beta, c, fallback=fallback, advantage=self.advantage)
        return ops.finish()


def _timed(fn) -> float:
    """Return the time (ms) of one call of `fn()` by CUDA events, alone on the device."""
    import cupy as cp

    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


def _iqr(times: list[float]) -> float:
    q = statistics.quantiles(times, n=4)
    return q[2] - q[0]


def measure(problem: Problem, config: Config, device: int = 0, reps: int = 20, seed: int = 0) -> dict:
    """Return the route's record entry at `problem`, beside `config`'s kernel (the family's best).

    Both are timed the same way in this process (CUDA events around one call, interleaved, median
    of `reps`), on uniform inputs; the check's advantage is cuBLAS's as measured here (the largest
    of two input kinds and seeds); the contract is the tier's on each of its input kinds, the route's
    errors against cuBLAS FP32's (a kind the check sends away is the family kernel's).

    Returns:
        The entry: moduli (run on uniform inputs), advantage, time_ms, time_iqr_ms, versus (the
        family), versus_ms, cublas_ms, contract (as a family entry's), ok (every kind within its
        limit), date, guarantee (the elementwise one, which the route ran with).

    Example:
        measure(Problem(4096, 4096, 4096, precision="high"), best_config)["time_ms"]
    """
    import cupy as cp

    with cp.cuda.Device(device):
        return _measure(problem, config, reps, seed)


def _measure(problem: Problem, config: Config, reps: int, seed: int) -> dict:
    import cupy as cp

    m, n, k = problem.M, problem.N, problem.K
    ta, tb = problem.trans
    rng = cp.random.default_rng(seed)

    def operands(kind: str):
        from ..gpu.precision import contract_input

        a = contract_input(rng, kind, (k, m) if ta else (m, k))
        b = contract_input(rng, kind, (n, k) if tb else (k, n))
        return a, b, (a.T if ta else a), (b.T if tb else b)

    kernel = Kernel(config, f"sm_{cp.cuda.Device().compute_capability}", "the search's best")
    dev = cp.cuda.Device().id
    adv = _advantage(operands, _route(dev).guard)
    routed = Routed(kernel, adv, dev)
    rows, ok = _contract(routed, operands, ta, tb)
    a, b, opa, opb = operands("uniform")
    out = cp.empty((m, n), cp.float32)
    calls = {
        "route": lambda: routed(a, b, out, trans_a=ta, trans_b=tb),
        "family": lambda: kernel(a, b, out, trans_a=ta, trans_b=tb),
        "cublas": lambda: cp.matmul(opa, opb, out=out),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(reps):  # interleaved: a clock that drifts moves all three alike
        for name, fn in calls.items():
            times[name].append(_timed(fn))
    moduli = routed.route(opa, opb, advantage=adv, fallback=lambda *_: None).moduli
    return {
        "moduli": moduli,
        "advantage": round(adv, 4),
        "time_ms": statistics.median(times["route"]),
        "time_iqr_ms": _iqr(times["route"]),
        "versus": config.family,
        "versus_ms": statistics.median(times["family"]),
        "cublas_ms": statistics.median(times["cublas"]),
        "contract": rows,
        "ok": ok,
        "date": datetime.date.today().isoformat(),
        "guarantee": GUARANTEES[0],  # _route's: every element within the bound
    }


def _advantage(operands, guard) -> float:
    """Return cuBLAS's advantage at the shape: the largest over _KINDS and _SEEDS (`guard`'s)."""
    import cupy as cp

    adv = 1.0
    for kind in _KINDS:
        for s in range(_SEEDS):
            _, _, opa, opb = operands(kind)
            adv = max(adv, guard.advantage(opa, opb, cp.matmul(opa, opb), s))
    return min(adv, ADVANTAGE_MAX) if math.isfinite(adv) else ADVANTAGE_MAX


def _contract(routed: Routed, operands, ta: bool, tb: bool) -> tuple[list[dict], bool]:
    """Return the route's contract rows (a family entry's form) and whether all met their limits."""
    import cupy as cp

    from ..gpu.precision import contract_errors
    from ..gpu.runner import Runner

    rows, ok = [], True
    for kind in Runner.CONTRACT_KINDS:  # the kinds a family's record holds its contract on
        a, b, opa, opb = operands(kind)
        a64, b64 = opa.astype(cp.float64), opb.astype(cp.float64)
        ref, scale = a64 @ b64, cp.abs(a64) @ cp.abs(b64)
        del a64, b64
        bar = contract_errors(cp.matmul(opa, opb), ref, scale)
        mine = contract_errors(routed(a, b, trans_a=ta, trans_b=tb), ref, scale)
        limit = [tier("high").contract * e for e in bar]
        ok = ok and all(e <= lim for e, lim in zip(mine, limit, strict=True))
        rows.append({"kind": kind, "errors": list(mine), "limit": limit, "cublas": list(bar)})
    return rows, ok
