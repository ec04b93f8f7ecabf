"""Search a family's space for one problem: plan the study, run the trials, re-time the best.

`search_family` is one family in this process; `search` is several in turn, sharing a timeout.
The study and its storage are in `studies`, the loop of one worker in `trials`, several worker
processes on one study in `parallel`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from optuna.trial import TrialState

from .evaluate import Evaluator
from .render import source_digest
from .space import Space
from .studies import Plan, measured_configs, next_queued, plan_family
from .trials import Progress, run_trials
from .types import Measurement, Problem, Status


@dataclass
class FamilyResult:
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


def finish_family(
    plan: Plan,
    evaluator: Evaluator,
    *,
    retime_top: int = 3,
    counts: dict | None = None,
    started: float | None = None,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> FamilyResult:
    """Re-time the top few (from every session and worker of the study), then cuBLAS."""
    started = started if started is not None else time.monotonic()
    study = plan.open()
    measured = measured_configs(study)
    failures: dict[str, str] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        st = t.user_attrs.get("status")
        if t.user_attrs.get("evaluated") and st not in (Status.OK.value, Status.REJECTED.value):
            failures.setdefault(st, f"{t.user_attrs.get('config')}: {t.user_attrs.get('reason', '')}"[:300])
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
        best.extra["source"] = source_digest(plan.space.family.resolve(best.config))
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


def search_family(
    space: Space,
    problem: Problem,
    evaluator: Evaluator,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = "tpe",
    seed: int = 0,
    deadline: float | None = None,
    batch: int = 8,
    retime_top: int = 3,
    progress: Progress | None = None,
    on_trial: Callable[[Measurement], None] | None = None,
    plan: Plan | None = None,
) -> FamilyResult:
    """Search one family's space for `problem` in this process; `trials` counts distinct
    configs measured in the study. `plan`: made beforehand by plan_ahead with the same settings."""
    t0 = time.monotonic()
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
    counts = run_trials(plan, evaluator, deadline=deadline, batch=batch, progress=progress, on_trial=on_trial)
    return finish_family(
        plan, evaluator, retime_top=retime_top, counts=counts, started=t0, progress=progress, deadline=deadline
    )


def plan_ahead(
    space: Space,
    problem: Problem,
    evaluator: Evaluator,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = "tpe",
    seed: int = 0,
    batch: int = 8,
) -> Plan:
    """A family's plan, queued, with its first window handed to the evaluator to compile: the
    start of search_family, made while the GPU is busy elsewhere (the cuBLAS baseline)."""
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


def search(
    spaces: Sequence[Space],
    problem: Problem,
    evaluator: Evaluator,
    *,
    timeout_s: float | None = None,
    first_plan: Plan | None = None,
    **kwargs,
) -> list[FamilyResult]:
    """Search each family in turn; a global `timeout_s` is shared out over the families left.
    `first_plan`: the first family's, made beforehand (plan_ahead)."""
    start = time.monotonic()
    out = []
    for i, space in enumerate(spaces):
        deadline = None
        if timeout_s is not None:
            left = timeout_s - (time.monotonic() - start)
            deadline = time.monotonic() + max(0.0, left) / (len(spaces) - i)
        plan = first_plan if i == 0 else None
        out.append(search_family(space, problem, evaluator, deadline=deadline, plan=plan, **kwargs))
    return out
