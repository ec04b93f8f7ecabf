"""A family's plan: its space enumerated for one problem, its study named, and what is queued.

The strategy queues in the study the seeds, the cost model's start-up, or a grid's points. A
search of several families takes them in `by_standing` order, and a timed one gives each its `Shares`.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from ..core.tiers import DEFAULT as DEFAULT_TIER
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
    priors_here: int = 0  # the priors valid here, a seed among them too (`space.priors` leaves those out)

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
    here = [c for c in dict.fromkeys(fam.built_for(c, problem) for c in space.priors) if c.name in valid]
    priors = [c for c in here if c not in kept]
    ranked = strategy.ranks_startup and not kept and cost.applies(fam, en.valid)
    # With several workers, a start-up a worker: each one's first window is the model's picks.
    count = max(strategy.random_startup, window) * workers
    startup = cost.startup(fam, en.valid, problem, limits, count, seed) if ranked and not queued_by_parent else []
    space = dataclasses.replace(space, seeds=kept + priors, priors=priors)
    name = study_name(gpu_slug, problem, space, sampler)
    return Plan(
        space, problem, en.valid, name, sampler, seed, min(trials, len(en.valid)), storage, startup, ranked, len(here)
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


# ---- the families' order and their shares of a timed search ------------------------------------
#
# Order: the families most likely to win first, from what is known before anything is measured:
# priors (configs that won on other GPUs at the nearest shapes of this tier, valid here), then how
# many things the family declares itself built for that this search meets (the problem's tier
# below FP32, in its PRECISION; this GPU's architecture, its `arch`; this shape, its `suits`), then
# the cost model's best estimate for the problem (FFMA families only: the model is not theirs for
# tensor cores, which the tier puts ahead), then the name. Nothing in it depends on a clock or a
# sampler's seed, so one command orders its families one way.
#
# Shares: a family with priors or a tier, GPU or shape of its own weighs LIKELY_WEIGHT, the others 1.
# At its turn a family gets the larger of its fixed share (its weight's part of the time left when
# the first family started) and its weight's part of the time left now among those still to come,
# but never more than the time left. A family that overruns (its last window, its re-time) so takes
# the time of the last families in the order, the least likely, which get less or none, while those
# before them keep their fixed shares; one that ends early leaves its time to those after it
# (shared out by weight, as the time was shared out in turn before). No deadline is past the
# timeout; past it run only the window in flight when a deadline comes (--window candidates, or
# in a family's first window TPE's start-up of 10; each bounded by --candidate-timeout) and the
# re-times (the top 3 and cuBLAS) of the family then searched and of those after it, which measure
# nothing new but re-time what their studies hold from earlier sessions: the same as when the
# time was shared out in turn.

ORDER_SAMPLE = 2000  # valid points, beside the seeds and start-up, a family's best estimate is over
LIKELY_WEIGHT = 2.0  # a likely family's share of a timed search, against 1 for another


@dataclass(frozen=True)
class Standing:
    """What a search knows of a family's chance to win before it measures anything."""

    family: str
    priors: int  # configs that won on other GPUs, valid here
    meant_for: tuple[str, ...]  # the tier, architecture, shapes ("the shape") it declares, where this search's
    estimate: float | None  # the cost model's best share of the FFMA peak; None: no model

    @property
    def likely(self) -> bool:
        """Whether it has priors, or a tier, GPU or shape of its own."""
        return bool(self.priors or self.meant_for)

    @property
    def weight(self) -> float:
        """Its weight in the shares of a timed search."""
        return LIKELY_WEIGHT if self.likely else 1.0

    def key(self) -> tuple:
        """Return the sort key: the most likely first, the name last."""
        return (not self.priors, -len(self.meant_for), -(self.estimate or 0.0), self.family)

    def describe(self) -> str:
        """Return 'wgmma_tf32 (3 priors; for high, sm_90a)': the name and why it comes early."""
        why = [f"{self.priors} prior{'s' * (self.priors != 1)}"] if self.priors else []
        why += [f"for {', '.join(self.meant_for)}"] if self.meant_for else []
        return self.family + (f" ({'; '.join(why)})" if why else "")


def standing(plan: Plan, limits) -> Standing:
    """Return what is known of the plan's family for its problem before a measurement."""
    fam, problem = plan.space.family, plan.problem
    meant_for = []
    tiers = fam.params.get("PRECISION")
    if problem.precision != DEFAULT_TIER and tiers is not None and problem.precision in tiers.choices:
        meant_for.append(problem.precision)  # FP32 families meet every tier, at FP32's speed
    if fam.declaration.arch and not fam.device_gaps(limits):
        meant_for.append(fam.declaration.arch)
    if fam.declaration.suits and not fam.unsuited(problem):
        meant_for.append("the shape")
    estimate = None
    if cost.applies(fam, plan.valid):
        # Seeded apart from the search's own seed: the order is one for a command whatever --seed.
        sample = random.Random(0).sample(plan.valid, min(ORDER_SAMPLE, len(plan.valid)))
        pool = dict.fromkeys([*plan.space.seeds, *plan.startup, *sample])
        estimate = max(cost.estimate(fam, fam.derive(c.as_dict()), problem, limits) for c in pool)
    return Standing(fam.name, plan.priors_here, tuple(meant_for), estimate)


def by_standing(plans: Sequence[Plan], limits) -> list[tuple[Plan, Standing]]:
    """Return the plans, each with its standing, the families most likely to win first."""
    return sorted(((p, standing(p, limits)) for p in plans), key=lambda ps: ps[1].key())


class Shares:
    """Each family's time in a timed search of several families in turn (see the comment above).

    Args:
        weights: Each family's weight, in the order they are searched.
        whole: The seconds left when the first family starts.
    """

    def __init__(self, weights: Sequence[float], whole: float):
        self.weights = list(weights)
        self.whole = max(0.0, whole)

    def fixed(self, i: int) -> float:
        """Return the i-th family's fixed share: its weight's part of the whole."""
        return self.whole * self.weights[i] / sum(self.weights)

    def share(self, i: int, left: float) -> float:
        """Return the seconds the i-th family gets when `left` seconds are left at its turn."""
        left = max(0.0, left)
        fair = left * self.weights[i] / sum(self.weights[i:])
        return min(left, max(self.fixed(i), fair))


def order_line(standings: Sequence[Standing], shares: Shares | None = None) -> str:
    """Return the one line a search prints of its order (and with a timeout, the fixed shares)."""
    parts = [s.describe() + (f" {shares.fixed(i):.0f}s" if shares is not None else "") for i, s in enumerate(standings)]
    return "families, likeliest first: " + ", ".join(parts)
