"""A family's plan: its space enumerated for one problem, its study named, and what is queued.

The strategy queues in the study the seeds, the cost model's start-up, or a grid's points.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from ..core.types import Config, Problem, UserError
from ..kernels.space import Space
from . import cost, strategies
from .storage import make_storage
from .studies import all_measured, open_study, study_name


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
    # With no seeds, the start-up the static cost model ranks best (cost.startup) instead of
    # random draws; the neighbour phase then follows the model too (`ranked`). Empty where it
    # does not apply, and in a worker's plan (the parent queued it).
    startup: list[Config] = dataclasses.field(default_factory=list)
    ranked: bool = False

    @functools.cached_property
    def valid_by_name(self) -> dict[str, Config]:
        """The valid configs by name."""
        return {c.name: c for c in self.valid}

    @functools.cached_property
    def index_of(self) -> dict[str, int]:
        """Each valid config's index in `valid`, by name."""
        return {c.name: i for i, c in enumerate(self.valid)}

    @functools.cached_property
    def strategy(self) -> strategies.Strategy:
        """The strategy that `sampler` names."""
        return strategies.get(self.sampler)

    def open(self) -> optuna.Study:
        """Return the plan's study (created on first use), with its strategy's sampler."""
        return open_study(make_storage(self.storage_url), self.name, self.strategy.sampler(self.seed))


def make_plan(
    space: Space,
    problem: Problem,
    limits,
    *,
    gpu_slug: str,
    storage: str,
    trials: int = 30,
    sampler: str = strategies.DEFAULT,
    seed: int = 0,
    queued_by_parent: bool = False,
    workers: int = 1,
    window: int = 1,
) -> Plan:
    """Enumerate the space (its layout parameters fixed to the problem's) and name the study.

    No storage is touched. A seed that breaks its template's rules or lies outside the value lists is
    a mistake in the space file (an error); one that is right as written but not here -- built for
    the problem's tier or layout it breaks a rule (a medium seed's tiles do not fit high's shared
    memory), or it exceeds this device's limits -- is left out, as is one written for another layout
    (Space.seeds_for).

    Args:
        queued_by_parent: A worker's plan, whose start-up the parent ranks and queues (the worker
            needs only whether the model ranks this search).
        workers: The processes that will share the study.
        window: The trials each has in flight: a start-up of max(random start-up, window) each
            (a first window wider than TPE's start-up would be filled by TPE's random draws).
    """
    strategy = strategies.get(sampler)
    written = space.seeds_for(problem)
    space = written.for_problem(problem)
    fam = space.family
    en = space.enumerate(limits)
    if not en.valid:
        raise UserError(space.describe_empty(en))
    valid = {c.name for c in en.valid}
    kept = _seeds_here(space, written, valid)
    # Priors (built for this problem: a nearest record may be of another layout) are tried after
    # the seeds, where they are valid here; with no seeds the model's start-up follows them (a
    # few configs of other GPUs do not make a start-up).
    priors = list(dict.fromkeys(fam.built_for(c, problem) for c in space.priors))
    priors = [c for c in priors if c.name in valid and c not in kept]
    ranked = strategy.ranks_startup and not kept and cost.applies(fam, en.valid)
    # With several workers, a start-up a worker: each one's first window is the model's picks.
    count = max(strategy.random_startup, window) * workers
    startup = cost.startup(fam, en.valid, problem, limits, count, seed) if ranked and not queued_by_parent else []
    space = dataclasses.replace(space, seeds=kept + priors, priors=priors)
    return Plan(
        space,
        problem,
        en.valid,
        study_name(gpu_slug, problem, space, sampler),
        sampler,
        seed,
        min(trials, len(en.valid)),
        storage,
        startup,
        ranked,
    )


def queue_plan(plan: Plan) -> int:
    """Open (or resume) the study, queue what is not yet measured, and return how many it queued.

    That is the seeds (or with none, the model's start-up), and what else the strategy queues (grid:
    the plan's next points).
    """
    study = plan.open()
    measured = all_measured(study)  # a config measured and not told too: its trial is re-queued
    first = list(dict.fromkeys([*plan.space.seeds, *plan.startup]))  # the model may rank a prior first too
    order, queued = plan.strategy.to_queue(plan, study, first)
    n = 0
    for cfg in order:
        if cfg.name in measured or cfg.name in queued:
            continue
        study.enqueue_trial(plan.strategy.trial_params(plan, cfg), user_attrs={"config": cfg.name, "planned": True})
        n += 1
    return n


def plan_family(space: Space, problem: Problem, limits, **kwargs) -> Plan:
    """Make a family's plan (make_plan) and queue it (queue_plan)."""
    plan = make_plan(space, problem, limits, **kwargs)
    queue_plan(plan)
    return plan


def next_queued(plan: Plan, n: int) -> list[Config]:
    """Return the configs of the first `n` trials waiting in the plan's study: the next asks."""
    waiting = plan.open().get_trials(deepcopy=False, states=(TrialState.WAITING,))
    names = [t.user_attrs.get("config") for t in sorted(waiting, key=lambda t: t.number)]
    by_name = plan.valid_by_name
    return [by_name[c] for c in names if c in by_name][:n]


def _seeds_here(space: Space, written: Space, valid: set[str]) -> list[Config]:
    """Return the seeds of `space` that are valid points here, each once.

    A seed that is wrong as written (in `written`) is an error in the space file.
    """
    kept = []
    for seed_cfg, as_written in zip(space.seeds, written.seeds, strict=True):
        if seed_cfg.name in valid:
            if seed_cfg not in kept:  # a layout's own seed may be another's built for it
                kept.append(seed_cfg)
            continue
        outside = [
            f"{p}={v!r} not in the value list"
            for p, v in as_written.params
            if v not in written.values[p] and p not in written.seed_layout(as_written)
        ]
        mistakes = space.family.broken_rules(as_written) + outside
        if mistakes:
            what = f"{space.source}: seed {as_written.name} is not a valid point of the space"
            raise UserError(f"{what}: " + "; ".join(mistakes))
    return kept
