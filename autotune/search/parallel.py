"""Several search processes on one study: process i runs trials on device i.

Optuna's storage coordinates them (see `studies`): each asks, measures and tells its own trials,
the families in the parent's order with its shares of a timeout (plans.by_standing, plans.Shares);
a killed one's trials are failed and re-queued, and measured by this process when no worker is
left to. The best configs of each family are re-timed afterwards on one GPU, in this process.
The processes end with this one, however it ends.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from ..core import redact
from ..core.types import Problem, UserError, error_line
from ..kernels.space import Space
from . import strategies
from .driver import FamilyResult, finish_family
from .evaluate import Evaluator
from .heartbeats import recover_stale
from .plans import Shares, by_standing, make_plan, order_line, queue_plan
from .progress import Progress
from .storage import STORAGE_FAULTS, fault_line
from .trials import run_trials

WORKER_SEED_STRIDE = 1_000_003  # process i samples with seed + i * this (modulo SEED_SPAN)
SEED_SPAN = 2**32  # Optuna's samplers take seeds below this


def portable(space: Space) -> tuple:
    """Return what a spawned process needs to load the same space, so the same study name.

    A Space holds compiled expressions, which do not pickle: this is the same values, seeds or none,
    and priors.
    """
    return (space.family.name, space.source, space.cold, list(space.priors))


def rebuilt(portable_space: tuple) -> Space:
    """Return the Space that `portable` described."""
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
    order=None,
) -> None:  # pragma: no cover - subprocess
    """Run search process `index`: each family's trials in turn on its own evaluator.

    Its device is `index` plus the spec's device; the time left is shared out over the families. It
    starts its evaluator and makes its plans while the parent makes and queues the same plans, and
    asks for trials once `queued` is set (a study whose seeds or start-up are not queued yet would
    hand it TPE's draws instead). `order`: shared numbers the parent sets before `queued`, the
    families' indices in its order (plans.by_standing) then their weights (plans.Shares).
    """
    _die_with_parent()
    try:
        _search_process(index, evaluator_spec, families, problem, plan_kwargs, queued, deadline_wall, batch, order)
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the group; the parent says so
        sys.exit(130)
    except (UserError, *STORAGE_FAULTS) as exc:  # one line, as the command prints it (a bug keeps its traceback)
        storage = plan_kwargs.get("storage", "")
        line = str(exc) if isinstance(exc, UserError) else fault_line(storage, exc)
        line = error_line(redact.text(line, redact.secrets(storage)))
        print(f"autotune: worker {index}: error: {line}", file=sys.stderr, flush=True)
        sys.exit(1)


def _search_process(
    index: int,
    evaluator_spec: dict,
    families: list[tuple],
    problem: Problem,
    plan_kwargs: dict,
    queued,
    deadline_wall: float | None,
    batch: int,
    order=None,
) -> None:  # pragma: no cover - subprocess
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
        n = len(plans)
        picks = [int(x) for x in order[:n]] if order is not None else list(range(n))
        weights = list(order[n:]) if order is not None else [1.0] * n
        shares = Shares(weights, deadline_wall - time.time()) if deadline_wall is not None else None
        for i, pick in enumerate(picks):
            deadline = None
            if shares is not None:
                deadline = time.monotonic() + shares.share(i, deadline_wall - time.time())
            run_trials(plans[pick], ev, deadline=deadline, batch=batch, shared=True, recover=False)
    finally:
        ev.close()


PR_SET_PDEATHSIG = 1  # prctl(2), Linux
EXIT_GRACE_S = 20.0  # how long a search process whose parent died may take to end through its exit


# A search process left behind went on measuring into the study, holding its GPU. Linux sends
# SIGTERM at once (prctl PR_SET_PDEATHSIG); everywhere, a thread waits on the parent's sentinel and
# sends it too (and catches a parent that died before the prctl). SIGTERM ends the process through
# SystemExit, so that its evaluator (and its GPU worker) is closed. That exit runs the finally
# blocks of whatever it interrupted, and one of them can wait for good (all three search processes
# of a killed parent once outlived it by a minute on a loaded 2-core machine; what they waited on
# was not found): past EXIT_GRACE_S the thread ends the process without it. Nothing is lost that
# a resumed search needs: its trials in flight are retried by their heartbeats (heartbeats.py),
# and its GPU worker ends when its pipe closes.
def _die_with_parent() -> None:  # pragma: no cover - subprocess
    """End this search process when the one that started it ends, however it ends."""

    def _end(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _end)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass
    parent = mp.parent_process()
    if parent is not None:

        def _watch() -> None:
            parent.join()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(EXIT_GRACE_S)
            os._exit(128 + signal.SIGTERM)

        threading.Thread(target=_watch, name="parent-watch", daemon=True).start()


def _ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit {exitcode}"


class SearchProcesses:
    """`workers` processes (process i on device i) sharing one study per family.

    Made in two steps so that the start-up overlaps the parent's cuBLAS baseline: the constructor
    starts the processes (their imports, GPU workers and plans) and makes and queues the parent's
    plans; `run` lets the processes ask for trials, waits for them and re-times the top configs on
    `final_evaluator` (one GPU).
    """

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
        sampler: str = strategies.DEFAULT,
        seed: int = 0,
        timeout_s: float | None = None,
        batch: int = 8,
    ):
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout_s if timeout_s is not None else None
        self.batch = batch
        self.short: list[str] = []  # families left short of their budget (see run)
        deadline_wall = time.time() + timeout_s if timeout_s is not None else None
        kwargs = dict(gpu_slug=gpu_slug, storage=storage, trials=trials, sampler=sampler, seed=seed, window=batch)
        ctx = mp.get_context("spawn")
        # Set once the plans are queued and the parent's GPU is free: process 0 shares device 0
        # with the parent, whose cuBLAS baseline is timed meanwhile.
        self.queued = ctx.Event()
        # The order the parent makes of its plans, for the processes started before it is known:
        # the families' indices, then their weights (read once `queued` is set).
        order = ctx.Array("d", 2 * len(spaces), lock=False)
        fams = [portable(sp) for sp in spaces]
        self.procs = [
            ctx.Process(
                target=run_search_process,
                args=(i, evaluator_spec, fams, problem, kwargs, self.queued, deadline_wall, batch, order),
            )
            for i in range(workers)
        ]
        for p in self.procs:
            p.start()
        try:
            plans = [make_plan(sp, problem, limits, workers=workers, **kwargs) for sp in spaces]
            ranked = by_standing(plans, limits)
            self.plans = [p for p, _ in ranked]
            self.standings = [s for _, s in ranked]
            at = {id(p): i for i, p in enumerate(plans)}
            order[:] = [at[id(p)] for p in self.plans] + [s.weight for s in self.standings]
            for plan in self.plans:
                queue_plan(plan)
                recover_stale(plan.open(), wait=True)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the processes still alive."""
        for p in self.procs:
            if p.is_alive():
                p.terminate()

    def run(
        self, final_evaluator: Evaluator, retime_top: int = 3, progress: Progress | None = None
    ) -> list[FamilyResult]:
        """Let the processes ask, wait for them, and re-time each family's best here.

        Where a process died (killed, or an error), the trials it had in flight are failed and re-queued
        once they stop beating, and this process measures them and whatever else the budget holds, on
        `final_evaluator`. A family still short of its budget (its time not spent) is named in `short`.
        """
        if progress and len(self.plans) > 1:
            left = self.deadline - time.monotonic() if self.deadline is not None else None
            shares = Shares([s.weight for s in self.standings], left) if left is not None else None
            progress.note(order_line(self.standings, shares))
        self.queued.set()
        try:
            for p in self.procs:
                p.join()
        except BaseException:
            self.stop()
            raise
        failed = {i: p.exitcode for i, p in enumerate(self.procs) if p.exitcode != 0}
        stream = progress.stream if progress else sys.stderr
        if failed:
            ended = ", ".join(f"{i} ({_ended(code)})" for i, code in failed.items())
            stream.write(f"worker(s) {ended} ended early: their trials in flight are re-queued and measured here\n")
            stream.flush()
            for plan in self.plans:
                recover_stale(plan.open(), wait=True)
                run_trials(
                    plan, final_evaluator, deadline=self.deadline, batch=self.batch, progress=progress, recover=False
                )
        results = [
            finish_family(
                plan, final_evaluator, retime_top=retime_top, started=self.t0, progress=progress, deadline=self.deadline
            )
            for plan in self.plans
        ]
        timed_out = self.deadline is not None and time.monotonic() >= self.deadline
        self.short = [
            f"{r.family}: {r.evaluated} of {plan.budget} configs measured"
            for plan, r in zip(self.plans, results, strict=True)
            if r.evaluated < plan.budget and not timed_out
        ]
        return results
