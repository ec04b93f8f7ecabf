"""The neighbour phase: a strategy's last share of the budget spent next to the best so far.

The share (its `local_share`) is of its trials or of its time to a deadline; the configs are one
step from the best measured.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from ..core.types import Config
from ..kernels.space import Space
from . import cost
from .plans import Plan


def next_neighbour(
    space: Space,
    valid_by_name: dict[str, Config],
    measured: dict,
    busy: set[str],
    rng: random.Random,
    rank: Callable[[Config], float] | None = None,
) -> Config | None:
    """Return an unmeasured valid config one step from one of the best three measured so far.

    A step moves one parameter to the next value up or down its sorted list (the best config first).
    The steps from a config are tried in random order, or with `rank` the highest-ranked first.
    """
    ranked = sorted(
        ((v, n) for n, (s, v) in measured.items() if s == TrialState.COMPLETE and v and n in valid_by_name),
        reverse=True,
    )
    for _, name in ranked[:3]:
        cfg = valid_by_name[name]
        steps = []
        for p, vals in space.values.items():
            order = sorted(vals)
            i = order.index(cfg[p])
            steps += [(p, order[j]) for j in (i - 1, i + 1) if 0 <= j < len(order)]
        rng.shuffle(steps)
        near = [Config.make(cfg.family, {**cfg.as_dict(), p: v}) for p, v in steps]
        near = [c for c in near if c.name in valid_by_name and c.name not in measured and c.name not in busy]
        if near:
            return max(near, key=rank) if rank else near[0]  # max keeps the first of equals
    return None


class NeighbourPhase:
    """When the neighbour phase comes, and which neighbour it queues.

    It comes with the last share of the trials, or of the time to the deadline (a search given 300 s
    and no trial count, or more trials than its time allows, would otherwise never reach its
    neighbours); a strategy whose share is 0 has none.
    """

    def __init__(self, plan: Plan, limits, started: float, deadline: float | None):
        self.plan, self.limits = plan, limits
        self.share = plan.strategy.local_share
        self.trials = round(self.share * plan.budget)
        self.starts_at = None if deadline is None else deadline - self.share * (deadline - started)
        self.rng = random.Random(plan.seed)
        # A plan started from the cost model climbs by it too: the best-estimated neighbour first.
        self.rank = self._estimate if plan.ranked else None

    def _estimate(self, cfg: Config) -> float:
        fam, problem = self.plan.space.family, self.plan.problem
        return cost.estimate(fam, fam.derive(cfg.as_dict()), problem, self.limits)

    def has_come(self, remaining: int, now: float) -> bool:
        """Whether the phase has come, with `remaining` trials of the budget left at time `now`.

        `remaining` counts trials neither measured nor in flight; `now` is the loop's clock.
        """
        if not self.share:
            return False
        return remaining <= self.trials or (self.starts_at is not None and now >= self.starts_at)

    def queue(self, study: optuna.Study, measured: dict, busy: set[str], remaining: int, now: float) -> None:
        """Once the phase has come, queue an unmeasured neighbour of the best (none of `busy`).

        Only into an empty queue, so that the next ask pops this neighbour and not a re-queued trial,
        which would leave the neighbour waiting after the search.
        """
        if not self.has_come(remaining, now) or study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return
        near = next_neighbour(self.plan.space, self.plan.valid_by_name, measured, busy, self.rng, self.rank)
        if near is not None:
            params = self.plan.strategy.trial_params(self.plan, near)
            study.enqueue_trial(params, user_attrs={"config": near.name, "local": True})
