"""The ask/evaluate/tell loop of one worker on one family's study.

Statically invalid proposals and failures (compile, fault, hang, wrong result) are told to Optuna
as PRUNED, with their status and reason in the trial's user attributes; only verified
measurements are COMPLETE. A config already measured, or in flight here or at another worker, is
never measured again. What differs by strategy is read from the plan's `strategy`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from ..core.types import Config, Measurement, Status
from .evaluate import Evaluator
from .heartbeats import GRACE_S, Heartbeat, recover_stale, release
from .interrupts import Interrupts
from .neighbours import NeighbourPhase
from .plans import Plan, queue_plan
from .progress import Progress
from .storage import make_storage
from .studies import TrialReader, measured_configs, untold_configs

STARTUP_POLL_S = 0.25  # a worker waiting for the others' start-up looks again after this


def _measurement_attrs(m: Measurement) -> dict:
    d = m.to_dict()
    d.pop("extra", None)
    return d


class TrialLoop:
    """One worker's trials on one family's study.

    A window of `batch` trials is in flight (all of a strategy's random start-up at once): they
    compile (CPU threads) while the GPU runs whichever is compiled first; each finished trial is told
    and one new trial asked, so every later ask sees all results but the window's. Where the strategy
    has a neighbour phase (its `local_share`), the last share of the budget goes to neighbours of the
    best configs.

    The study may be shared, by the workers of one search (`shared`: the parent recovered it) or by
    searches of the same shape started apart on one results folder or storage: every loop reads what
    the others have measured and have in flight before it runs a config, so a config is measured
    once whoever asks for it; one measured and not told (a worker stopped between the two) gets the
    known outcome.

    State: `measured` (config name -> (state, value), this study, all workers), `in_flight` (the
    configs asked here and not yet told), `others` (configs other workers have in flight), `pending`
    (the window: asked trials waiting for the GPU), `counts` (status -> trials, this worker), `best`
    (best GFLOP/s of the study), `asks` (trials asked here), and `exhausted` (a strategy whose points
    all come from the queue: it ran dry).
    """

    def __init__(
        self,
        plan: Plan,
        evaluator: Evaluator,
        *,
        deadline: float | None = None,
        batch: int = 8,
        progress: Progress | None = None,
        shared: bool = False,
        recover: bool = True,
        on_trial: Callable[[Measurement], None] | None = None,
    ):
        self.started = time.monotonic()
        self.plan, self.evaluator = plan, evaluator
        self.deadline, self.batch, self.shared, self.on_trial = deadline, batch, shared, on_trial
        self.progress = progress or Progress(enabled=False)
        self.worker = f"{socket.gethostname()}:{getattr(evaluator, 'device_id', 'replay')}"
        self.study = plan.open()
        if recover:
            recover_stale(self.study, wait=not shared)
        self.recovered = time.monotonic()
        self.reader = TrialReader(self.study)
        self.valid_by_name = plan.valid_by_name
        self.heart: Heartbeat | None = None  # beats while `run` runs
        self.counts: dict[str, int] = {}
        self.measured = measured_configs(self.study)
        self.untold = untold_configs(self.study)  # measured, not told: never measured again
        self.max_asks = max(50 * plan.budget, 500)
        self.asks = 0
        self.in_flight: set[str] = set()
        self.host_s = 0.0  # asks and tells since the last evaluation
        self.others: set[str] = set()
        self.running: dict[int, str | None] = {}  # trial number -> config, the study's trials in flight
        self.pending: list[tuple[optuna.Trial, Config]] = []
        self.exhausted = False
        self.best = max((v for s, v in self.measured.values() if s == TrialState.COMPLETE and v), default=None)
        self.strategy = plan.strategy
        self.neighbours = NeighbourPhase(plan, evaluator.limits, self.started, deadline)
        self.interrupts = Interrupts()

    def run(self) -> dict[str, int]:
        """Ask, evaluate and tell until the budget, the deadline or the asks run out.

        Returns this worker's trial counts by status. A SIGINT or SIGTERM meanwhile ends it, but never
        between a measurement and its record (interrupts.Interrupts).
        """
        self.heart = Heartbeat(make_storage(self.plan.storage_url))
        try:
            with self.interrupts:
                self._loop()
        except (KeyboardInterrupt, SystemExit):
            release(self.study, [trial for trial, _cfg in self.pending])  # a resume need not wait for them
            raise
        finally:
            self.heart.close()
        return self.counts

    def _loop(self) -> None:
        """Run `run`'s loop: fill the window, evaluate the first ready, tell it, fill it again."""
        self.refill()
        # The problem's inputs onto the GPU while the first window compiles (a worker of a
        # search over several GPUs has done no baseline that made them).
        setup = getattr(self.evaluator, "setup", None)
        if setup is not None:
            setup(self.plan.problem)
        done = 0
        while self.pending or self.waiting_for_startup():
            if not self.pending:  # the other workers are measuring the random start-up
                time.sleep(STARTUP_POLL_S)
                self.refill()
                continue
            self.evaluate_next()
            t = time.monotonic()
            self.refill()
            self.host_s += time.monotonic() - t
            done += 1
            if self.progress.tty or done % self.batch == 0 or not self.pending:
                self.progress.update(
                    self.plan.space.family.name,
                    len(self.measured),
                    self.plan.budget,
                    self.best,
                    None,
                    self.counts,
                    self.started,
                    deadline=self.deadline,
                )

    def refill(self) -> None:
        """Ask new trials until the window is full, handing them to the evaluator to compile."""
        window = self.strategy.window(self.batch, len(self.measured))
        while len(self.pending) < window and self.more():
            got = self.ask_batch(window - len(self.pending))
            if not got:
                return
            self.pending.extend(got)

    def evaluate_next(self) -> None:
        """Evaluate the pending trial the evaluator has ready first, and tell its outcome."""
        problem = self.plan.problem
        trial, cfg = self.pending.pop(self.evaluator.first_ready([c for _, c in self.pending], problem))
        with self.interrupts.held():  # a SIGINT or SIGTERM meanwhile acts once this is recorded
            t0 = time.monotonic()
            (m,) = self.evaluator.evaluate([cfg], problem)
            t1 = time.monotonic()
            # The measurement first, in one write: a search killed after it (kill -9, no handler
            # runs) leaves it in the study, and the one that resumes tells it (settle) instead of
            # measuring the config again.
            trial.set_user_attr("measurement", _measurement_attrs(m))
            self.in_flight.discard(cfg.name)
            trial.set_user_attr("worker", self.worker)
            trial.set_user_attr("status", m.status.value)
            # Where this worker's time went (a search over several GPUs is read from these): the
            # evaluation (waiting for its compile, then the GPU), and the host's asks and tells
            # since the last one, all on this loop's thread.
            timing = {"at_s": t0 - self.started, "evaluate_s": t1 - t0, "host_s": self.host_s}
            trial.set_user_attr("timing", {"pid": os.getpid(), **{k: round(v, 3) for k, v in timing.items()}})
            trial.set_user_attr("evaluated", True)  # last: "evaluated" implies a measurement and its status
            self.record(trial, cfg, m)
        self.host_s = time.monotonic() - t1
        if self.on_trial:
            self.on_trial(m)

    # An ask now would get a random draw of the whole value lists, most of them outside the valid
    # space: told at once, they crowded TPE's start-up with rejections, and two workers asked twice as
    # often as one for each config measured. So this one waits.
    def waiting_for_startup(self) -> bool:
        """Whether to wait while other workers measure the strategy's random start-up.

        That is in a shared study with fewer than `random_startup` configs measured, some in flight
        elsewhere, and the queue empty.
        """
        if not (self.strategy.random_startup and self.others) or not self.more():
            return False
        return len(self.measured) < self.strategy.random_startup and not self.study.get_trials(
            deepcopy=False, states=(TrialState.WAITING,)
        )

    def more(self) -> bool:
        """Whether to ask more: budget, asks and deadline left, and (queue_only) a queue."""
        return (
            not self.exhausted
            and len(self.measured) < self.plan.budget
            and self.asks < self.max_asks
            and not self.past_deadline()
        )

    def past_deadline(self) -> bool:
        """Whether the loop's clock has passed its deadline."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def remaining(self) -> int:
        """Return the budget not yet measured nor in flight (here or at other workers)."""
        return self.plan.budget - len(self.measured) - len(self.in_flight) - len(self.others)

    def ask_batch(self, n: int) -> list[tuple[optuna.Trial, Config]]:
        """Ask up to `n` new, valid, unmeasured configs; trials needing no run are told."""
        out: list[tuple[optuna.Trial, Config]] = []
        self.refresh()
        while len(out) < min(n, self.remaining) and self.asks < self.max_asks:
            if self.past_deadline() or self.waiting_for_startup():
                break
            busy = self.in_flight | self.others | set(self.untold)
            self.neighbours.queue(self.study, self.measured, busy, self.remaining, time.monotonic())
            trial = self.study.ask()
            self.heart.add(trial)
            self.asks += 1
            if self.strategy.queue_only and not trial.user_attrs.get("planned"):
                trial.set_user_attr("status", "unplanned")
                self.tell(trial, state=TrialState.PRUNED)  # the queue is empty: its next chunk, if any
                if queue_plan(self.plan):
                    continue
                self.exhausted = True
                break
            cfg = self.strategy.suggest(self.plan, trial)
            trial.set_user_attr("config", cfg.name)
            # Once the config is named, not once a batch: other workers finish and take trials
            # meanwhile (TPE's draws, the same neighbour), and one just measured or taken would
            # run twice. Of two workers naming one config at once, the later sees the earlier.
            self.refresh(asked=trial.number)
            if self.settle(trial, cfg):
                continue
            self.in_flight.add(cfg.name)
            out.append((trial, cfg))
            # Its compile starts now, not once the batch is asked: a window's asks take a
            # second or more, the first compile of a search waited for all of them.
            self.evaluator.prefetch([cfg], self.plan.problem)
        return out

    def refresh(self, asked: int | None = None) -> None:
        """Take in what other workers (or searches of the study) measured and have in flight.

        Trial `asked`, this worker's latest, is not counted. Now and then, first fail and re-queue the
        trials of workers that stopped beating (killed since this loop started), which would otherwise
        stay in flight, never measured and never asked again.
        """
        if time.monotonic() - self.recovered >= GRACE_S:
            recover_stale(self.study, wait=False)
            self.recovered = time.monotonic()
        for t in self.reader.changed({trial._trial_id for trial, _cfg in self.pending}):
            if t.state == TrialState.RUNNING:
                self.running[t.number] = t.user_attrs.get("config")
                continue
            self.running.pop(t.number, None)
            self.measured.update(measured_configs(self.study, [t]))
            self.untold.update(untold_configs(self.study, [t]))
        self.others = {c for n, c in self.running.items() if c and n != asked} - self.in_flight

    def settle(self, trial: optuna.Trial, cfg: Config) -> bool:
        """Tell a trial that needs no run, and say whether it was one.

        Such a trial is a re-queued one already measured, a config outside the valid space, or a config
        measured or in flight.
        """
        if "measurement" in trial.user_attrs:
            # A re-queued trial whose worker measured it but stopped before telling (killed, or
            # failed as stale): tell that measurement instead of running the candidate again.
            m = Measurement.from_dict(trial.user_attrs["measurement"])
            trial.set_user_attr("status", m.status.value)
            trial.set_user_attr("evaluated", True)
            self.record(trial, cfg, m)
            return True
        if cfg.name not in self.valid_by_name:
            reasons = self.plan.space.family.violations(cfg, self.evaluator.limits) or ["not a point of the space"]
            trial.set_user_attr("status", Status.REJECTED.value)
            trial.set_user_attr("reason", "; ".join(reasons)[:500])
            self.tell(trial, state=TrialState.PRUNED)
            self.counts[Status.REJECTED.value] = self.counts.get(Status.REJECTED.value, 0) + 1
            return True
        if any(cfg.name in known for known in (self.measured, self.untold, self.in_flight, self.others)):
            # Measured or on its way: tell the known outcome (or a pruned placeholder),
            # spending no GPU time and no budget.
            state, value = self.measured.get(cfg.name) or self.untold.get(cfg.name) or (TrialState.PRUNED, None)
            trial.set_user_attr("duplicate", True)
            self.tell(trial, value, state)
            return True
        return False

    def record(self, trial: optuna.Trial, cfg: Config, m: Measurement) -> None:
        """Count a measurement, tell it, and remember the config as measured.

        It is told COMPLETE with its GFLOP/s, or PRUNED with the reason.
        """
        self.counts[m.status.value] = self.counts.get(m.status.value, 0) + 1
        # Known as measured before it is told: a storage that fails on the tell stops the search,
        # whose record is then made from what this loop knows (search.search_family).
        if m.ok:
            self.measured[cfg.name] = (TrialState.COMPLETE, m.gflops)
            self.best = max(self.best or 0.0, m.gflops)
            self.tell(trial, m.gflops)
        else:
            self.measured[cfg.name] = (TrialState.PRUNED, None)
            trial.set_user_attr("reason", m.message[:500])
            self.tell(trial, state=TrialState.PRUNED)

    def tell(self, trial: optuna.Trial, value=None, state=TrialState.COMPLETE) -> None:
        """Tell Optuna a trial's outcome and stop its heartbeat."""
        self.heart.done(trial)
        try:
            self.study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
        except (ValueError, RuntimeError):
            pass  # already failed as stale by another worker: it has been re-queued


def run_trials(plan: Plan, evaluator: Evaluator, **kwargs) -> dict[str, int]:
    """Run the ask/evaluate/tell loop of one worker (see TrialLoop); return its counts by status."""
    return TrialLoop(plan, evaluator, **kwargs).run()
