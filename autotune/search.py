"""The Optuna loop over any Evaluator: ask a batch, filter, compile and run, tell.

One study per (GPU, shape, family, space): its name carries a hash of the value lists, so a
changed space never collides with an old study, and the same command resumes the same study.
Statically invalid proposals are told to Optuna as PRUNED without compiling or launching;
failures (compile, fault, hang, wrong result) are PRUNED too, with their status and reason
in the trial's user attributes; only verified measurements are COMPLETE.

Several workers (processes, GPUs, hosts) can share one study through Optuna's RDB storage:
each records heartbeats for its trials in flight, so the trials of a worker that was killed
are failed and re-queued with the same parameters (RetryHeartbeatStaleTrialCallback) and run once by
whoever asks next. The grid sampler is a queue: every planned point is enqueued once and
popped by exactly one worker.
"""

from __future__ import annotations

import hashlib
import json
import random
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Sequence

import optuna
from optuna.storages import (
    RDBStorage,
    RetryHeartbeatStaleTrialCallback,
    fail_stale_trials,
)
from optuna.trial import TrialState

from .evaluate import Evaluator
from .space import Space
from .types import Config, Measurement, Problem, Status, UserError

SAMPLERS = ("tpe", "random", "grid")
TPE_STARTUP = 10  # tpe: random trials before the model; asked at once, they need no results
LOCAL_SHARE = 0.4  # tpe: this share of the budget goes to neighbours of the best configs
HEARTBEAT_S, GRACE_S = 2, 8  # a worker silent for GRACE_S has its trials failed and re-queued
optuna.logging.set_verbosity(optuna.logging.WARNING)
# Heartbeats and the retry callback are marked experimental; they are what makes workers safe.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")


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


def default_storage(results_dir, gpu_slug: str) -> str:
    path = Path(results_dir) / gpu_slug / "optuna.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def study_name(gpu_slug: str, problem: Problem, space: Space, sampler: str) -> str:
    # The template's text is part of the name: after an edit, the configs measured before are
    # other code and are measured again (a resumed study would skip them).
    blob = json.dumps({"values": space.values, "sampler": sampler, "template": space.family.fingerprint}, sort_keys=True)
    return f"{gpu_slug}/{problem.name}/{space.family.name}/{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


def make_sampler(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    if kind == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=TPE_STARTUP, constant_liar=True,
                                          multivariate=True)
    if kind in ("random", "grid"):  # grid points come from the queue; random only fills a race
        return optuna.samplers.RandomSampler(seed=seed)
    raise UserError(f"unknown sampler {kind!r}; choose from {', '.join(SAMPLERS)}")


_STORAGES: dict[str, optuna.storages.BaseStorage] = {}


def make_storage(url: str):
    """An RDB storage with heartbeats (sqlite, postgresql, mysql), "memory:NAME" for a study
    that lives in this process only (replays), else the URL as given. One per URL and process:
    each new RDB storage costs an engine and a schema check."""
    if url.startswith("memory:"):
        return _STORAGES.setdefault(url, optuna.storages.InMemoryStorage())
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        return url
    cached = _STORAGES.get(url)
    if cached is not None and (not url.startswith("sqlite:///") or Path(url[len("sqlite:///"):]).exists()):
        return cached
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite:") else {"pool_pre_ping": True}
    try:
        storage = RDBStorage(url, engine_kwargs=engine, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                             heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3))
    except Exception as exc:  # noqa: BLE001 - any storage failure is the user's URL or file
        raise UserError(f"storage {url!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
    if url.startswith("sqlite:"):
        _serialize_sqlite(storage.engine)
    _STORAGES[url] = storage
    return storage


def _serialize_sqlite(engine) -> None:
    """SQLite has no SELECT ... FOR UPDATE, so two processes can both pop the same queued trial
    (WAITING -> RUNNING). Taking the write lock when each transaction begins makes Optuna's
    read-then-update atomic across processes (SQLAlchemy's recipe for pysqlite)."""
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection, _record):
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the listeners are dropped


def open_study(storage, name: str, sampler) -> optuna.Study:
    try:
        return optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                   direction="maximize", load_if_exists=True)
    except Exception as exc:  # noqa: BLE001
        url = getattr(storage, "url", storage)
        raise UserError(f"storage {url!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None


class _Heartbeat:
    """Records a heartbeat for every trial this process has in flight."""

    def __init__(self, storage):
        self.storage = storage if isinstance(storage, RDBStorage) else None
        self.ids: set[int] = set()
        self._stop = threading.Event()
        if self.storage is not None:
            threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for tid in list(self.ids):
                try:
                    self.storage.record_heartbeat(tid)
                except Exception:  # noqa: BLE001 - a missed beat only risks a retry
                    pass

    def add(self, trial: optuna.Trial) -> None:
        self.ids.add(trial._trial_id)
        if self.storage is not None:
            self.storage.record_heartbeat(trial._trial_id)

    def done(self, trial: optuna.Trial) -> None:
        self.ids.discard(trial._trial_id)

    def close(self) -> None:
        self._stop.set()


class Progress:
    """A live status line: configs measured, best so far (GFLOP/s and x cuBLAS), rejected and
    failed counts, ETA. Rewritten in place on a terminal, a line per batch otherwise."""

    def __init__(self, stream=None, enabled: bool = True, cublas_gflops: float | None = None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.cublas_gflops = cublas_gflops
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, family: str, done: int, budget: int, best: float | None, cublas: float | None,
               counts: dict, started: float, final: bool = False) -> None:
        if not self.enabled:
            return
        cublas = cublas or self.cublas_gflops
        elapsed = time.monotonic() - started
        eta = elapsed / done * (budget - done) if done and not final else 0.0
        width = 20
        filled = int(width * min(done, budget) / budget) if budget else width
        bar = "#" * filled + "." * (width - filled)
        best_s = f"{best:7.0f} GFLOP/s" if best else "      - GFLOP/s"
        ratio = f" {best / cublas:4.2f}x cuBLAS" if best and cublas else ""
        rejected = counts.get(Status.REJECTED.value, 0)
        failed = sum(v for k, v in counts.items() if k not in (Status.OK.value, Status.REJECTED.value))
        line = (f"[{family:>10}] [{bar}] {done:3d}/{budget}  best {best_s}{ratio}  rejected {rejected} "
                f"failed {failed}  {elapsed:5.1f}s  eta {eta:4.0f}s")
        if self.tty and not final:
            self.stream.write("\r" + line)
        else:
            self.stream.write(("\r" if self.tty else "") + line + "\n")
        self.stream.flush()


def _measurement_attrs(m: Measurement) -> dict:
    d = m.to_dict()
    d.pop("extra", None)
    return d


@dataclass
class Plan:
    """What every worker of one family's search shares."""

    space: Space
    problem: Problem
    valid: list[Config]
    name: str
    sampler: str
    seed: int
    budget: int
    storage_url: str

    @property
    def valid_by_name(self) -> dict[str, Config]:
        return {c.name: c for c in self.valid}


def make_plan(space: Space, problem: Problem, limits, *, gpu_slug: str, storage: str, trials: int = 30,
              sampler: str = "tpe", seed: int = 0) -> Plan:
    """Enumerate the space and name the study; no storage is touched."""
    fam = space.family
    en = space.enumerate(limits)
    if not en.valid:
        raise UserError(space.describe_empty(en))
    valid = {c.name for c in en.valid}
    for seed_cfg in space.seeds:
        if seed_cfg.name not in valid:
            raise UserError(f"{space.source}: seed {seed_cfg.name} is not a valid point of the space: "
                            + "; ".join(fam.violations(seed_cfg, limits) or ["not in the value lists"]))
    return Plan(space, problem, en.valid, study_name(gpu_slug, problem, space, sampler), sampler, seed,
                min(trials, len(en.valid)), storage)


def queue_plan(plan: Plan) -> None:
    """Open (or resume) the study and queue the seeds not yet measured, and for grid the whole
    plan (a seeded shuffle after the seeds, so a partial grid is an unbiased sample)."""
    space = plan.space
    study = open_study(make_storage(plan.storage_url), plan.name, make_sampler(plan.sampler, plan.seed))
    measured = _measured(study)
    index_of = {c.name: i for i, c in enumerate(plan.valid)}
    queued = {t.user_attrs.get("config") for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))}
    order = list(space.seeds)
    if plan.sampler == "grid":
        rest = [c for c in plan.valid if c not in set(space.seeds)]
        random.Random(plan.seed).shuffle(rest)
        order = (order + rest)[: plan.budget]
    for cfg in order:
        if cfg.name in measured or cfg.name in queued:
            continue
        params = {"index": index_of[cfg.name]} if plan.sampler == "grid" else cfg.as_dict()
        study.enqueue_trial(params, user_attrs={"config": cfg.name, "planned": True})


def plan_family(space: Space, problem: Problem, limits, **kwargs) -> Plan:
    plan = make_plan(space, problem, limits, **kwargs)
    queue_plan(plan)
    return plan


def _measured(study: optuna.Study) -> dict[str, tuple[TrialState, float | None]]:
    out = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        cname = t.user_attrs.get("config")
        if cname and t.user_attrs.get("evaluated"):
            out[cname] = (t.state, t.value)
    return out


def _recover_stale(study: optuna.Study, wait: bool) -> None:
    """Fail (and so re-queue) the trials of workers that stopped beating; with `wait`, give
    trials left RUNNING by a killed process the grace period to go stale first."""
    try:
        fail_stale_trials(study)
        if wait and study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            time.sleep(GRACE_S + HEARTBEAT_S)
            fail_stale_trials(study)
    except (ValueError, NotImplementedError):
        return  # a storage without heartbeats
    # A worker killed between asking a trial and its first heartbeat leaves a RUNNING trial
    # with no heartbeat, which Optuna never calls stale. Live workers name a trial's config
    # within milliseconds of asking, so one still unnamed after the grace period is orphaned.
    # It has no parameters yet: failing it loses nothing.
    cutoff = datetime.now() - timedelta(seconds=GRACE_S)
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if "config" not in t.user_attrs and t.datetime_start is not None and t.datetime_start < cutoff:
            try:
                study.tell(t.number, state=TrialState.FAIL)
            except (ValueError, RuntimeError):
                pass  # told meanwhile


def _next_neighbour(space: Space, valid_by_name: dict[str, Config], measured: dict, busy: set[str],
                    rng: random.Random) -> Config | None:
    """An unmeasured valid config one step from one of the best three measured so far: one
    parameter moved to the next value up or down its sorted list (the best first)."""
    ranked = sorted(((v, n) for n, (s, v) in measured.items()
                     if s == TrialState.COMPLETE and v and n in valid_by_name), reverse=True)
    for _, name in ranked[:3]:
        cfg = valid_by_name[name]
        steps = []
        for p, vals in space.values.items():
            order = sorted(vals)
            i = order.index(cfg[p])
            steps += [(p, order[j]) for j in (i - 1, i + 1) if 0 <= j < len(order)]
        rng.shuffle(steps)
        for p, v in steps:
            near = Config.make(cfg.family, {**cfg.as_dict(), p: v})
            if near.name in valid_by_name and near.name not in measured and near.name not in busy:
                return near
    return None


def run_trials(plan: Plan, evaluator: Evaluator, *, deadline: float | None = None, batch: int = 8,
               progress: Progress | None = None, shared: bool = False, recover: bool = True,
               on_trial: Callable[[Measurement], None] | None = None) -> dict[str, int]:
    """The ask/evaluate/tell loop of one worker; returns its trial counts by status."""
    t0 = time.monotonic()
    worker = f"{socket.gethostname()}:{getattr(evaluator, 'device_id', 'replay')}"
    space, problem, fam = plan.space, plan.problem, plan.space.family
    storage = make_storage(plan.storage_url)
    study = open_study(storage, plan.name, make_sampler(plan.sampler, plan.seed))
    if recover:
        _recover_stale(study, wait=not shared)
    valid_by_name = plan.valid_by_name
    heart = _Heartbeat(storage)
    counts: dict[str, int] = {}
    progress = progress or Progress(enabled=False)
    measured = _measured(study)
    max_asks = max(50 * plan.budget, 500)
    asks = 0
    in_flight: set[str] = set()
    others: set[str] = set()  # configs other workers have in flight
    exhausted = False  # grid: the queue ran dry
    best_val = max((v for s, v in measured.values() if s == TrialState.COMPLETE and v), default=None)

    def refresh() -> None:
        if shared:
            measured.update(_measured(study))
            others.clear()
            others.update(t.user_attrs.get("config") for t in
                          study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
            others.difference_update(in_flight)
            others.discard(None)

    def suggest(trial: optuna.Trial) -> Config:
        if plan.sampler == "grid":
            return plan.valid[trial.suggest_int("index", 0, len(plan.valid) - 1)]
        return Config.make(fam.name, {p: trial.suggest_categorical(p, vals) for p, vals in space.values.items()})

    def tell(trial: optuna.Trial, value=None, state=TrialState.COMPLETE) -> None:
        heart.done(trial)
        try:
            study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
        except (ValueError, RuntimeError):
            pass  # already failed as stale by another worker: it has been re-queued

    local_budget = round(LOCAL_SHARE * plan.budget)
    rng = random.Random(plan.seed)

    def remaining() -> int:
        return plan.budget - len(measured) - len(in_flight) - len(others)

    def ask_batch(n: int) -> list[tuple[optuna.Trial, Config]]:
        """Up to `n` new, valid, unmeasured configs; the rest is told at once."""
        nonlocal asks, exhausted
        out: list[tuple[optuna.Trial, Config]] = []
        refresh()
        while len(out) < min(n, remaining()) and asks < max_asks:
            if deadline is not None and time.monotonic() >= deadline:
                break
            # Only into an empty queue, so that the ask below pops this neighbour and not a
            # re-queued trial, which would leave the neighbour waiting after the search.
            if plan.sampler == "tpe" and remaining() <= local_budget and \
                    not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
                near = _next_neighbour(space, valid_by_name, measured, in_flight | others, rng)
                if near is not None:
                    study.enqueue_trial(near.as_dict(), user_attrs={"config": near.name, "local": True})
            trial = study.ask()
            heart.add(trial)
            asks += 1
            if plan.sampler == "grid" and not trial.user_attrs.get("planned"):
                trial.set_user_attr("status", "unplanned")
                tell(trial, state=TrialState.PRUNED)  # the queue is empty: the plan is all taken
                exhausted = True
                break
            cfg = suggest(trial)
            trial.set_user_attr("config", cfg.name)
            if trial.user_attrs.get("evaluated") and cfg.name not in measured:
                # A re-queued trial whose worker measured it but died before telling: record
                # that measurement instead of running the candidate again.
                m = Measurement.from_dict(trial.user_attrs["measurement"])
                record(trial, cfg, m)
                continue
            if cfg.name not in valid_by_name:
                reasons = fam.violations(cfg, evaluator.limits) or ["not a point of the space"]
                trial.set_user_attr("status", Status.REJECTED.value)
                trial.set_user_attr("reason", "; ".join(reasons)[:500])
                tell(trial, state=TrialState.PRUNED)
                counts[Status.REJECTED.value] = counts.get(Status.REJECTED.value, 0) + 1
                continue
            if cfg.name in measured or cfg.name in in_flight or cfg.name in others:
                # Measured or on its way: tell the known outcome (or a pruned placeholder),
                # spending no GPU time and no budget.
                state, value = measured.get(cfg.name, (TrialState.PRUNED, None))
                trial.set_user_attr("duplicate", True)
                tell(trial, value, state)
                continue
            in_flight.add(cfg.name)
            out.append((trial, cfg))
        return out

    def record(trial: optuna.Trial, cfg: Config, m: Measurement) -> None:
        nonlocal best_val
        counts[m.status.value] = counts.get(m.status.value, 0) + 1
        if m.ok:
            tell(trial, m.gflops)
            measured[cfg.name] = (TrialState.COMPLETE, m.gflops)
            best_val = max(best_val or 0.0, m.gflops)
        else:
            trial.set_user_attr("reason", m.message[:500])
            tell(trial, state=TrialState.PRUNED)
            measured[cfg.name] = (TrialState.PRUNED, None)

    def more() -> bool:
        return not exhausted and len(measured) < plan.budget and asks < max_asks and \
            (deadline is None or time.monotonic() < deadline)

    # A window of `batch` trials in flight (all of TPE's random start-up trials at once): they
    # compile (CPU threads) while the GPU runs whichever is compiled first; each finished trial
    # is told and one new trial asked, so every later ask sees all results but the window's.
    pending: list[tuple[optuna.Trial, Config]] = []

    def refill() -> None:
        window = max(batch, TPE_STARTUP - len(measured)) if plan.sampler == "tpe" else batch
        while len(pending) < window and more():
            got = ask_batch(window - len(pending))
            if not got:
                return
            pending.extend(got)
            evaluator.prefetch([c for _, c in got], problem)

    try:
        refill()
        done = 0
        while pending:
            trial, cfg = pending.pop(evaluator.first_ready([c for _, c in pending], problem))
            (m,) = evaluator.evaluate([cfg], problem)
            in_flight.discard(cfg.name)
            trial.set_user_attr("worker", worker)
            trial.set_user_attr("status", m.status.value)
            trial.set_user_attr("measurement", _measurement_attrs(m))
            trial.set_user_attr("evaluated", True)  # last: "evaluated" implies a measurement
            record(trial, cfg, m)
            if on_trial:
                on_trial(m)
            refill()
            done += 1
            if progress.tty or done % batch == 0 or not pending:
                progress.update(fam.name, len(measured), plan.budget, best_val, None, counts, t0)
    finally:
        heart.close()
    return counts


def finish_family(plan: Plan, evaluator: Evaluator, *, retime_top: int = 3, counts: dict | None = None,
                  started: float | None = None, progress: Progress | None = None) -> FamilyResult:
    """Re-time the top few (from every session and worker of the study), then cuBLAS."""
    started = started if started is not None else time.monotonic()
    study = open_study(make_storage(plan.storage_url), plan.name, make_sampler(plan.sampler, plan.seed))
    measured = _measured(study)
    failures: dict[str, str] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        st = t.user_attrs.get("status")
        if t.user_attrs.get("evaluated") and st not in (Status.OK.value, Status.REJECTED.value):
            failures.setdefault(st, f"{t.user_attrs.get('config')}: {t.user_attrs.get('reason', '')}"[:300])
    by_name = plan.valid_by_name
    ranked = sorted(((v, n) for n, (s, v) in measured.items() if s == TrialState.COMPLETE and n in by_name),
                    reverse=True)[:retime_top]
    retimed = evaluator.evaluate([by_name[n] for _, n in ranked], plan.problem, retime=True) if ranked else []
    ok = [m for m in retimed if m.ok]
    best = max(ok, key=lambda m: m.gflops) if ok else None
    cublas = evaluator.baseline(plan.problem) if best else None
    if best is not None and cublas:
        best.extra["cublas"] = cublas
        best.extra["ratio"] = best.gflops / cublas["gflops"]
    counts = counts or {}
    if progress:
        progress.update(plan.space.family.name, len(measured), plan.budget, best.gflops if best else None,
                        cublas["gflops"] if cublas else None, counts, started, final=True)
    return FamilyResult(plan.space.family.name, best, cublas, plan.name, len(plan.valid), len(measured), counts,
                        failures, retimed, time.monotonic() - started)


def search_family(space: Space, problem: Problem, evaluator: Evaluator, *, gpu_slug: str,
                  storage: str, trials: int = 30, sampler: str = "tpe", seed: int = 0,
                  deadline: float | None = None, batch: int = 8, retime_top: int = 3,
                  progress: Progress | None = None,
                  on_trial: Callable[[Measurement], None] | None = None) -> FamilyResult:
    """Search one family's space for `problem` in this process; `trials` counts distinct
    configs measured in the study."""
    t0 = time.monotonic()
    plan = plan_family(space, problem, evaluator.limits, gpu_slug=gpu_slug, storage=storage, trials=trials,
                       sampler=sampler, seed=seed)
    counts = run_trials(plan, evaluator, deadline=deadline, batch=batch, progress=progress, on_trial=on_trial)
    return finish_family(plan, evaluator, retime_top=retime_top, counts=counts, started=t0, progress=progress)


def search(spaces: Sequence[Space], problem: Problem, evaluator: Evaluator, *, timeout_s: float | None = None,
           **kwargs) -> list[FamilyResult]:
    """Search each family in turn; a global `timeout_s` is shared out over the families left."""
    start = time.monotonic()
    out = []
    for i, space in enumerate(spaces):
        deadline = None
        if timeout_s is not None:
            left = timeout_s - (time.monotonic() - start)
            deadline = time.monotonic() + max(0.0, left) / (len(spaces) - i)
        out.append(search_family(space, problem, evaluator, deadline=deadline, **kwargs))
    return out


# ---------------------------------------------------------------------------------------------
# Several workers on one study.


def _worker_main(index: int, evaluator_spec: dict, families: list[tuple[str, str]], problem: Problem,
                 plan_kwargs: dict, deadline_wall: float | None, batch: int) -> None:  # pragma: no cover - subprocess
    from .evaluate import build_evaluator

    ev = build_evaluator(evaluator_spec, index)
    try:
        for i, (family, source) in enumerate(families):
            plan = make_plan(Space.load(family, source), problem, ev.limits, **plan_kwargs)
            deadline = None
            if deadline_wall is not None:
                left = deadline_wall - time.time()
                deadline = time.monotonic() + max(0.0, left) / (len(families) - i)
            run_trials(plan, ev, deadline=deadline, batch=batch, shared=True, recover=False)
    finally:
        ev.close()


def search_parallel(spaces: Sequence[Space], problem: Problem, evaluator_spec: dict, workers: int, limits, *,
                    gpu_slug: str, storage: str, trials: int = 30, sampler: str = "tpe", seed: int = 0,
                    timeout_s: float | None = None, batch: int = 8, retime_top: int = 3,
                    progress: Progress | None = None, final_evaluator: Evaluator) -> list[FamilyResult]:
    """`workers` processes (worker i on device i) share one study per family; Optuna's storage
    coordinates them. The top configs are then re-timed by `final_evaluator` (one GPU)."""
    import multiprocessing as mp

    t0 = time.monotonic()
    kwargs = dict(gpu_slug=gpu_slug, storage=storage, trials=trials, sampler=sampler, seed=seed)
    plans = [make_plan(sp, problem, limits, **kwargs) for sp in spaces]
    for plan in plans:
        queue_plan(plan)
        _recover_stale(open_study(make_storage(storage), plan.name, make_sampler(sampler, seed)), wait=True)
    deadline_wall = time.time() + timeout_s if timeout_s is not None else None
    ctx = mp.get_context("spawn")
    fams = [(sp.family.name, sp.source) for sp in spaces]
    procs = [ctx.Process(target=_worker_main, args=(i, evaluator_spec, fams, problem, kwargs, deadline_wall, batch))
             for i in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [i for i, p in enumerate(procs) if p.exitcode != 0]
    if failed and progress:
        progress.stream.write(f"worker(s) {failed} exited with an error; their trials were re-queued\n")
    return [finish_family(plan, final_evaluator, retime_top=retime_top, started=t0, progress=progress)
            for plan in plans]
