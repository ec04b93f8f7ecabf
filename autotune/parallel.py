"""Several search processes on one study: process i runs trials on device i.

Optuna's storage coordinates them (see `studies`): each asks, measures and tells its own
trials; a killed one's trials are failed and re-queued. The best configs of each family are
re-timed afterwards on one GPU, in this process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .evaluate import Evaluator
from .search import FamilyResult, finish_family
from .space import Space
from .studies import make_plan, queue_plan, recover_stale
from .trials import Progress, run_trials
from .types import Problem


def run_search_process(
    index: int,
    evaluator_spec: dict,
    families: list[tuple[str, str, bool]],
    problem: Problem,
    plan_kwargs: dict,
    deadline_wall: float | None,
    batch: int,
) -> None:  # pragma: no cover - subprocess
    """The body of search process `index`: the trials of each family in turn on its own
    evaluator (device index + the spec's device), the time left shared out over the families."""
    from .evaluate import build_evaluator

    ev = build_evaluator(evaluator_spec, index)
    try:
        for i, (family, source, cold) in enumerate(families):
            space = Space.load(family, source)
            plan = make_plan(space.without_seeds() if cold else space, problem, ev.limits, **plan_kwargs)
            deadline = None
            if deadline_wall is not None:
                left = deadline_wall - time.time()
                deadline = time.monotonic() + max(0.0, left) / (len(families) - i)
            run_trials(plan, ev, deadline=deadline, batch=batch, shared=True, recover=False)
    finally:
        ev.close()


def search_parallel(
    spaces: Sequence[Space],
    problem: Problem,
    evaluator_spec: dict,
    workers: int,
    limits,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = "tpe",
    seed: int = 0,
    timeout_s: float | None = None,
    batch: int = 8,
    retime_top: int = 3,
    progress: Progress | None = None,
    final_evaluator: Evaluator,
) -> list[FamilyResult]:
    """`workers` processes (process i on device i) share one study per family; Optuna's storage
    coordinates them. The top configs are then re-timed by `final_evaluator` (one GPU)."""
    import multiprocessing as mp

    t0 = time.monotonic()
    kwargs = dict(gpu_slug=gpu_slug, storage=storage, trials=trials, sampler=sampler, seed=seed)
    plans = [make_plan(sp, problem, limits, **kwargs) for sp in spaces]
    for plan in plans:
        queue_plan(plan)
        recover_stale(plan.open(), wait=True)
    deadline_wall = time.time() + timeout_s if timeout_s is not None else None
    ctx = mp.get_context("spawn")
    fams = [(sp.family.name, sp.source, sp.cold) for sp in spaces]  # each process loads them again
    procs = [
        ctx.Process(target=run_search_process, args=(i, evaluator_spec, fams, problem, kwargs, deadline_wall, batch))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [i for i, p in enumerate(procs) if p.exitcode != 0]
    if failed and progress:
        progress.stream.write(f"worker(s) {failed} exited with an error; their trials were re-queued\n")
    return [
        finish_family(plan, final_evaluator, retime_top=retime_top, started=t0, progress=progress) for plan in plans
    ]
