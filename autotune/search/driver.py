"""Search a family's space for one problem: plan the study, run the trials, re-time the best.

`search_family` is one family in this process; `search` is several in turn, the likeliest to win
first, sharing a timeout.
The study and its storage are in `studies`, the loop of one worker in `trials`, several worker
processes on one study in `parallel`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from optuna.trial import TrialState

from ..core.types import Measurement, Problem, Status, UserError
from ..kernels.render import source_digest
from ..kernels.space import Space
from . import strategies
from .evaluate import Evaluator, code_of
from .plans import Plan, Shares, Standing, by_standing, make_plan, next_queued, order_line, plan_family, queue_plan
from .progress import Progress
from .storage import STORAGE_FAULTS, fault_line
from .studies import all_measured
from .trials import TrialLoop


@dataclass
class FamilyResult:
    """What one family's search found: the re-timed best, cuBLAS beside it, and the counts."""

    family: str
    best: Measurement | None  # after the top-K re-time
    cublas: dict | None  # cuBLAS timed right after the re-time, same process
    study_name: str
    valid_points: int
    evaluated: int  # distinct configs measured in this study (all sessions, all workers)
    counts: dict[str, int] = field(default_factory=dict)  # status -> trials, this session
    failures: dict[str, str] = field(default_factory=dict)  # failed status -> an example, whole study
    retimed: list[Measurement] = field(default_factory=list)
    seconds: float = 0.0


class SearchStopped(UserError):
    """A search its storage failed under (a full disk, a dropped connection).

    One line, and the families' results made from what was measured (`results`, to be recorded).
    """

    def __init__(self, message: str, results: list[FamilyResult]):
        super().__init__(message)
        self.results = results


def finish_family(
    plan: Plan,
    evaluator: Evaluator,
    *,
    retime_top: int = 3,
    counts: dict | None = None,
    started: float | None = None,
    progress: Progress | None = None,
    deadline: float | None = None,
    measured: dict | None = None,
) -> FamilyResult:
    """Re-time the top few configs (from every session and worker of the study), then cuBLAS.

    Args:
        measured: Config name -> (state, value): what a trial loop knows was measured, for when the
            study cannot be read.
    """
    started = started if started is not None else time.monotonic()
    failures: dict[str, str] = {}
    if measured is None:
        measured, failures = _read_study(plan)
    by_name = plan.valid_by_name
    ranked = sorted(
        ((v, n) for n, (s, v) in measured.items() if s == TrialState.COMPLETE and n in by_name), reverse=True
    )[:retime_top]
    retimed = evaluator.evaluate([by_name[n] for _, n in ranked], plan.problem, retime=True) if ranked else []
    ok = [m for m in retimed if m.ok]
    best = max(ok, key=lambda m: m.gflops) if ok else None
    cublas = evaluator.baseline(plan.problem) if best else None
    if best is not None and cublas:
        best.extra["cublas"] = cublas
        best.extra["ratio"] = best.gflops / cublas["gflops"]
        resolved = plan.space.family.resolve(best.config)
        best.extra["source"] = source_digest(resolved)
        best.extra["code"] = code_of(resolved, evaluator.limits.arch)
    counts = counts or {}
    if progress:
        progress.update(
            plan.space.family.name,
            len(measured),
            plan.budget,
            best.gflops if best else None,
            cublas["gflops"] if cublas else None,
            counts,
            started,
            final=True,
            deadline=deadline,
        )
    return FamilyResult(
        plan.space.family.name,
        best,
        cublas,
        plan.name,
        len(plan.valid),
        len(measured),
        counts,
        failures,
        retimed,
        time.monotonic() - started,
    )


def _read_study(plan: Plan) -> tuple[dict, dict[str, str]]:
    """Return what the plan's study has measured, and an example of each way a candidate failed."""
    study = plan.open()
    failures: dict[str, str] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        st = t.user_attrs.get("status")
        if t.user_attrs.get("evaluated") and st not in (Status.OK.value, Status.REJECTED.value):
            failures.setdefault(st, f"{t.user_attrs.get('config')}: {t.user_attrs.get('reason', '')}"[:300])
    return all_measured(study), failures


def search_family(
    space: Space,
    problem: Problem,
    evaluator: Evaluator,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = strategies.DEFAULT,
    seed: int = 0,
    deadline: float | None = None,
    batch: int = 8,
    retime_top: int = 3,
    progress: Progress | None = None,
    on_trial: Callable[[Measurement], None] | None = None,
    plan: Plan | None = None,
) -> FamilyResult:
    """Search one family's space for `problem` in this process.

    `trials` counts distinct configs measured in the study; `plan`: made by plan_ahead, same settings.

    Raises:
        SearchStopped: The storage failed meanwhile. The trials told so far stay in the study, and
            the best of what was measured is re-timed from what the loop knows.
    """
    t0 = time.monotonic()
    loop = None
    try:
        if plan is None:
            plan = plan_ahead(
                space,
                problem,
                evaluator,
                gpu_slug=gpu_slug,
                storage=storage,
                trials=trials,
                sampler=sampler,
                seed=seed,
                batch=batch,
            )
        loop = TrialLoop(plan, evaluator, deadline=deadline, batch=batch, progress=progress, on_trial=on_trial)
        counts = loop.run()
        return finish_family(
            plan, evaluator, retime_top=retime_top, counts=counts, started=t0, progress=progress, deadline=deadline
        )
    except STORAGE_FAULTS as exc:
        line = fault_line(storage, exc)
        if loop is None or not any(s == TrialState.COMPLETE for s, _v in loop.measured.values()):
            raise SearchStopped(line, []) from None
        kept = finish_family(
            plan,
            evaluator,
            retime_top=retime_top,
            counts=loop.counts,
            started=t0,
            progress=progress,
            deadline=deadline,
            measured=loop.measured,
        )
        raise SearchStopped(line, [kept]) from None


def plan_ahead(
    space: Space,
    problem: Problem,
    evaluator: Evaluator,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = strategies.DEFAULT,
    seed: int = 0,
    batch: int = 8,
) -> Plan:
    """Return a family's plan, queued, with its first window handed to the evaluator to compile.

    This is the start of search_family, made while the GPU is busy elsewhere (the cuBLAS baseline).
    """
    plan = plan_family(
        space,
        problem,
        evaluator.limits,
        gpu_slug=gpu_slug,
        storage=storage,
        trials=trials,
        sampler=sampler,
        seed=seed,
        window=batch,
    )
    evaluator.prefetch(next_queued(plan, batch), problem)
    return plan


def plan_search(
    spaces: Sequence[Space], problem: Problem, evaluator: Evaluator, *, batch: int = 8, **plan_kw
) -> list[tuple[Plan, Standing]]:
    """Return every family's plan and standing, the likeliest first (by_standing), the first queued.

    The first family's first window is handed to the evaluator to compile, as plan_ahead does: this
    is the start of `search`, made while the GPU is busy elsewhere (the cuBLAS baseline). `plan_kw`
    are make_plan's (gpu_slug, storage, trials, sampler, seed).
    """
    plans = [make_plan(sp, problem, evaluator.limits, window=batch, **plan_kw) for sp in spaces]
    order = by_standing(plans, evaluator.limits)
    if order:
        queue_plan(order[0][0])
        evaluator.prefetch(next_queued(order[0][0], batch), problem)
    return order


def search(
    spaces: Sequence[Space],
    problem: Problem,
    evaluator: Evaluator,
    *,
    timeout_s: float | None = None,
    planned: list[tuple[Plan, Standing]] | None = None,
    **kwargs,
) -> list[FamilyResult]:
    """Search each family in turn, the likeliest to win first; a `timeout_s` is shared out (Shares).

    The order and the shares are plans.by_standing's and plans.Shares'; every family's plan is made
    before the first is searched. `planned`: plan_search's order of `spaces`, made beforehand (its
    first plan queued). `kwargs` go to search_family. Results come in the order searched.
    """
    start = time.monotonic()
    progress: Progress | None = kwargs.get("progress")
    storage = kwargs.get("storage", "")
    window = kwargs.get("batch", 8)
    plan_kw = {k: kwargs[k] for k in ("gpu_slug", "storage", "trials", "sampler", "seed") if k in kwargs}
    order = planned if planned is not None else plan_search(spaces, problem, evaluator, batch=window, **plan_kw)
    queued_first = order[0][0] if order else None
    shares = None
    if timeout_s is not None:
        shares = Shares([s.weight for _, s in order], timeout_s - (time.monotonic() - start))
    if progress and len(order) > 1:
        progress.note(order_line([s for _, s in order], shares))
    out = []
    for i, (plan, _standing) in enumerate(order):
        deadline = None
        if shares is not None:
            deadline = time.monotonic() + shares.share(i, timeout_s - (time.monotonic() - start))
        try:
            if plan is not queued_first:  # queued at its turn; plan_search queued the first
                queue_plan(plan)
                evaluator.prefetch(next_queued(plan, window), problem)
            out.append(search_family(plan.space, problem, evaluator, deadline=deadline, plan=plan, **kwargs))
        except STORAGE_FAULTS as exc:
            raise SearchStopped(fault_line(storage, exc), out) from None
        except SearchStopped as stop:  # the families searched before it are results too
            raise SearchStopped(str(stop), out + stop.results) from None
    return out
