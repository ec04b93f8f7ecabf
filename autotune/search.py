"""The Optuna loop over any Evaluator: ask a batch, filter, compile and run, tell.

One study per (GPU, shape, family, space): its name carries a hash of the value lists, so a
changed space never collides with an old study, and the same command resumes the same study.
Statically invalid proposals are told to Optuna as PRUNED without compiling or launching;
failures (compile, fault, hang, wrong result) are PRUNED too, with their status and reason
in the trial's user attributes; only verified measurements are COMPLETE.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import optuna
from optuna.trial import TrialState

from .evaluate import Evaluator
from .space import Space
from .types import Config, Measurement, Problem, Status, UserError

SAMPLERS = ("tpe", "random", "grid")
optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass
class FamilyResult:
    family: str
    best: Measurement | None  # after the top-K re-time
    cublas: dict | None  # cuBLAS timed right after the re-time, same process
    study_name: str
    valid_points: int
    evaluated: int  # distinct configs measured in this study (all sessions)
    counts: dict[str, int] = field(default_factory=dict)  # status -> trials, this session
    retimed: list[Measurement] = field(default_factory=list)
    seconds: float = 0.0


def default_storage(results_dir, gpu_slug: str) -> str:
    from pathlib import Path
    path = Path(results_dir) / gpu_slug / "optuna.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def study_name(gpu_slug: str, problem: Problem, space: Space, sampler: str) -> str:
    blob = json.dumps({"values": space.values, "sampler": sampler}, sort_keys=True)
    return f"{gpu_slug}/{problem.name}/{space.family.name}/{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


class _AskTellGridSampler(optuna.samplers.GridSampler):
    """GridSampler for ask/tell: it calls Study.stop() when the grid is done, which only works
    inside optimize() and would leave the last trial RUNNING; the loop ends by itself."""

    def after_trial(self, study, trial, state, values) -> None:
        pass


def make_sampler(kind: str, seed: int, n_valid: int) -> optuna.samplers.BaseSampler:
    if kind == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, constant_liar=True,
                                          multivariate=True)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "grid":
        return _AskTellGridSampler({"index": list(range(n_valid))}, seed=seed)
    raise UserError(f"unknown sampler {kind!r}; choose from {', '.join(SAMPLERS)}")


def open_study(storage: str, name: str, sampler) -> optuna.Study:
    try:
        return optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                   direction="maximize", load_if_exists=True)
    except Exception as exc:  # noqa: BLE001 - any storage failure is the user's URL or file
        raise UserError(f"storage {storage!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None


class Progress:
    """One status line per batch (rewritten in place on a terminal)."""

    def __init__(self, stream=None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, family: str, done: int, budget: int, best: float | None, cublas: float | None,
               counts: dict, started: float, final: bool = False) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - started
        eta = elapsed / done * (budget - done) if done else float("nan")
        best_s = f"{best:9.0f} GFLOP/s" if best else "        - GFLOP/s"
        ratio = f" ({best / cublas:.2f}x cuBLAS)" if best and cublas else ""
        bad = sum(v for k, v in counts.items() if k != Status.OK.value)
        line = (f"[{family:>10}] {done:3d}/{budget} evaluated  best {best_s}{ratio}  "
                f"rejected/failed {bad}  {elapsed:5.1f}s  eta {eta:4.0f}s")
        if self.tty and not final:
            self.stream.write("\r" + line)
        else:
            self.stream.write(("\r" if self.tty else "") + line + "\n")
        self.stream.flush()


def _measurement_attrs(m: Measurement) -> dict:
    d = m.to_dict()
    d.pop("extra", None)
    return d


def search_family(space: Space, problem: Problem, evaluator: Evaluator, *, gpu_slug: str,
                  storage: str, trials: int = 30, sampler: str = "tpe", seed: int = 0,
                  deadline: float | None = None, batch: int = 8, retime_top: int = 3,
                  progress: Progress | None = None,
                  on_trial: Callable[[Measurement], None] | None = None) -> FamilyResult:
    """Search one family's space for `problem`; `trials` counts distinct configs measured."""
    t0 = time.monotonic()
    fam = space.family
    en = space.enumerate(evaluator.limits)
    if not en.valid:
        raise UserError(space.describe_empty(en))
    valid_by_name = {c.name: c for c in en.valid}
    index_of = {c.name: i for i, c in enumerate(en.valid)}
    name = study_name(gpu_slug, problem, space, sampler)
    study = open_study(storage, name, make_sampler(sampler, seed, len(en.valid)))

    measured: dict[str, tuple[TrialState, float | None]] = {}
    for t in study.get_trials(deepcopy=False):
        cname = t.user_attrs.get("config")
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and cname and t.user_attrs.get("evaluated"):
            measured[cname] = (t.state, t.value)
    for seed_cfg in space.seeds:
        if seed_cfg.name not in valid_by_name:
            raise UserError(f"{space.source}: seed {seed_cfg.name} is not a valid point of the space: "
                            + "; ".join(fam.violations(seed_cfg, evaluator.limits) or ["not in the value lists"]))
        if seed_cfg.name not in measured:
            params = {"index": index_of[seed_cfg.name]} if sampler == "grid" else seed_cfg.as_dict()
            study.enqueue_trial(params, skip_if_exists=True)

    budget = min(trials, len(en.valid))
    counts: dict[str, int] = {}
    progress = progress or Progress(enabled=False)
    max_asks = max(50 * budget, 500)
    asks = 0
    best_val = max((v for s, v in measured.values() if s == TrialState.COMPLETE and v), default=None)
    cublas_ref = None

    def suggest(trial: optuna.Trial) -> Config:
        if sampler == "grid":
            return en.valid[trial.suggest_int("index", 0, len(en.valid) - 1)]
        return Config.make(fam.name, {p: trial.suggest_categorical(p, vals) for p, vals in space.values.items()})

    in_flight: set[str] = set()

    def ask_batch() -> list[tuple[optuna.Trial, Config]]:
        """Up to `batch` new, valid, unmeasured configs; the rest is told at once."""
        nonlocal asks
        out: list[tuple[optuna.Trial, Config]] = []
        while len(out) < min(batch, budget - len(measured) - len(in_flight)) and asks < max_asks:
            if deadline is not None and time.monotonic() >= deadline:
                break
            trial = study.ask()
            asks += 1
            cfg = suggest(trial)
            trial.set_user_attr("config", cfg.name)
            if cfg.name not in valid_by_name:
                reasons = fam.violations(cfg, evaluator.limits) or ["not a point of the space"]
                trial.set_user_attr("status", Status.REJECTED.value)
                trial.set_user_attr("reason", "; ".join(reasons)[:500])
                study.tell(trial, state=TrialState.PRUNED)
                counts[Status.REJECTED.value] = counts.get(Status.REJECTED.value, 0) + 1
                continue
            if cfg.name in measured or cfg.name in in_flight:
                # Already measured or on its way: tell the known outcome (or a pruned
                # placeholder), spending no GPU time and no budget.
                state, value = measured.get(cfg.name, (TrialState.PRUNED, None))
                trial.set_user_attr("duplicate", True)
                study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
                continue
            in_flight.add(cfg.name)
            out.append((trial, cfg))
        return out

    # Two batches in flight: the next one compiles (CPU) while this one runs (GPU).
    nxt = ask_batch()
    evaluator.prefetch([c for _, c in nxt], problem)
    while nxt:
        pending = nxt
        nxt = ask_batch()
        evaluator.prefetch([c for _, c in nxt], problem)
        results = evaluator.evaluate([c for _, c in pending], problem)
        for (trial, cfg), m in zip(pending, results):
            in_flight.discard(cfg.name)
            counts[m.status.value] = counts.get(m.status.value, 0) + 1
            trial.set_user_attr("evaluated", True)
            trial.set_user_attr("status", m.status.value)
            trial.set_user_attr("measurement", _measurement_attrs(m))
            if m.ok:
                study.tell(trial, m.gflops)
                measured[cfg.name] = (TrialState.COMPLETE, m.gflops)
                best_val = max(best_val or 0.0, m.gflops)
            else:
                trial.set_user_attr("reason", m.message[:500])
                study.tell(trial, state=TrialState.PRUNED)
                measured[cfg.name] = (TrialState.PRUNED, None)
            if on_trial:
                on_trial(m)
        progress.update(fam.name, len(measured), budget, best_val, cublas_ref, counts, t0)
        if not nxt and len(measured) < budget and asks < max_asks and \
                (deadline is None or time.monotonic() < deadline):
            nxt = ask_batch()
            evaluator.prefetch([c for _, c in nxt], problem)

    # Re-time the top few (from every session of this study) before declaring a winner.
    ranked = sorted(((v, n) for n, (s, v) in measured.items() if s == TrialState.COMPLETE),
                    reverse=True)[:retime_top]
    retimed = evaluator.evaluate([valid_by_name[n] for _, n in ranked], problem, retime=True) if ranked else []
    ok = [m for m in retimed if m.ok]
    best = max(ok, key=lambda m: m.gflops) if ok else None
    cublas = evaluator.baseline(problem) if best else None
    if best is not None and cublas:
        best.extra["cublas"] = cublas
        best.extra["ratio"] = best.gflops / cublas["gflops"]
    progress.update(fam.name, len(measured), budget, best.gflops if best else None,
                    cublas["gflops"] if cublas else None, counts, t0, final=True)
    return FamilyResult(fam.name, best, cublas, name, len(en.valid), len(measured), counts,
                        retimed, time.monotonic() - t0)


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

