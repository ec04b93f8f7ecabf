"""Several search processes on one study: process i runs trials on device i.

Optuna's storage coordinates them (see `studies`): each asks, measures and tells its own
trials; a killed one's trials are failed and re-queued. The best configs of each family are
re-timed afterwards on one GPU, in this process.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Sequence

from .evaluate import Evaluator
from .search import FamilyResult, finish_family
from .space import Space
from .studies import make_plan, queue_plan, recover_stale
from .trials import Progress, run_trials
from .types import Problem

WORKER_SEED_STRIDE = 1_000_003  # process i samples with seed + i * this (modulo SEED_SPAN)
SEED_SPAN = 2**32  # Optuna's samplers take seeds below this


def portable(space: Space) -> tuple:
    """What a spawned process needs to load the same space (a Space holds compiled expressions,
    which do not pickle): the same values, seeds or none, and priors, so the same study name."""
    return (space.family.name, space.source, space.cold, list(space.priors))


def rebuilt(portable_space: tuple) -> Space:
    family, source, cold, priors = portable_space
    space = Space.load(family, source)
    space = space.without_seeds() if cold else space
    return space.with_priors(priors) if priors else space


def run_search_process(
    index: int,
    evaluator_spec: dict,
    families: list[tuple],
    problem: Problem,
    plan_kwargs: dict,
    queued,
    deadline_wall: float | None,
    batch: int,
) -> None:  # pragma: no cover - subprocess
    """The body of search process `index`: the trials of each family in turn on its own
    evaluator (device index + the spec's device), the time left shared out over the families.
    It starts its evaluator and makes its plans while the parent makes and queues the same plans,
    and asks for trials once `queued` is set (a study whose seeds or start-up are not queued yet
    would hand it TPE's draws instead)."""
    from .evaluate import build_evaluator

    ev = build_evaluator(evaluator_spec, index)
    try:
        # Each process its own sampler seed: with one seed, processes that start together draw
        # the same configs at the same moments, and measure some twice.
        kw = dict(plan_kwargs, seed=(plan_kwargs["seed"] + WORKER_SEED_STRIDE * index) % SEED_SPAN)
        plans = [make_plan(rebuilt(f), problem, ev.limits, queued_by_parent=True, **kw) for f in families]
        while not queued.wait(1.0):
            if mp.parent_process() is not None and not mp.parent_process().is_alive():
                return
        for i, plan in enumerate(plans):
            deadline = None
            if deadline_wall is not None:
                left = deadline_wall - time.time()
                deadline = time.monotonic() + max(0.0, left) / (len(plans) - i)
            run_trials(plan, ev, deadline=deadline, batch=batch, shared=True, recover=False)
    finally:
        ev.close()


class SearchProcesses:
    """`workers` processes (process i on device i) sharing one study per family; Optuna's storage
    coordinates them. Made in two steps so that the start-up overlaps the parent's cuBLAS
    baseline: the constructor starts the processes (their imports, GPU workers and plans) and
    makes and queues the parent's plans; `run` lets the processes ask for trials, waits for
    them and re-times the top configs on `final_evaluator` (one GPU)."""

    def __init__(
        self,
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
    ):
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout_s if timeout_s is not None else None
        deadline_wall = time.time() + timeout_s if timeout_s is not None else None
        kwargs = dict(gpu_slug=gpu_slug, storage=storage, trials=trials, sampler=sampler, seed=seed, window=batch)
        ctx = mp.get_context("spawn")
        # Set once the plans are queued and the parent's GPU is free: process 0 shares device 0
        # with the parent, whose cuBLAS baseline is timed meanwhile.
        self.queued = ctx.Event()
        fams = [portable(sp) for sp in spaces]
        self.procs = [
            ctx.Process(
                target=run_search_process,
                args=(i, evaluator_spec, fams, problem, kwargs, self.queued, deadline_wall, batch),
            )
            for i in range(workers)
        ]
        for p in self.procs:
            p.start()
        try:
            self.plans = [make_plan(sp, problem, limits, workers=workers, **kwargs) for sp in spaces]
            for plan in self.plans:
                queue_plan(plan)
                recover_stale(plan.open(), wait=True)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.terminate()

    def run(
        self, final_evaluator: Evaluator, retime_top: int = 3, progress: Progress | None = None
    ) -> list[FamilyResult]:
        self.queued.set()
        try:
            for p in self.procs:
                p.join()
        except BaseException:
            self.stop()
            raise
        failed = [i for i, p in enumerate(self.procs) if p.exitcode != 0]
        if failed and progress:
            progress.stream.write(f"worker(s) {failed} exited with an error; their trials were re-queued\n")
        return [
            finish_family(
                plan, final_evaluator, retime_top=retime_top, started=self.t0, progress=progress, deadline=self.deadline
            )
            for plan in self.plans
        ]
