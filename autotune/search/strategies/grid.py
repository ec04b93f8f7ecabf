"""Grid: every valid point of the space once, through the study's queue.

The points are queued (seeds first, then a seeded shuffle of the rest, so that a partial grid is
an unbiased sample) and each is popped by exactly one worker; a trial carries the point's index
in the plan, not its parameters.
"""

from __future__ import annotations

import random

from ...core.types import Config
from .base import Strategy, register

# Points queued at a time. A queued trial costs a write (about 4 ms on SQLite): the whole of
# warptile's space up front would take most of an hour before the first compile.
GRID_CHUNK = 2000


@register
class Grid(Strategy):
    """Every valid point once, popped from the study's queue in a seeded random order."""

    name = "grid"
    summary = "every valid point once, in a seeded random order"
    queue_only = True

    def sampler(self, seed: int):
        import optuna

        return optuna.samplers.RandomSampler(seed=seed)  # points come from the queue; this only fills a race

    def to_queue(self, plan, study, first: list[Config]) -> tuple[list[Config], set[str]]:
        """Return the plan's next GRID_CHUNK points not queued before in any state.

        A worker whose queue runs dry calls queue_plan again.
        """
        queued = {t.user_attrs.get("config") for t in study.get_trials(deepcopy=False) if t.user_attrs.get("planned")}
        seeds = set(plan.space.seeds)
        rest = [c for c in plan.valid if c not in seeds]
        # One order for the study, whoever queues the next chunk: each worker process samples
        # with a seed of its own, and its own shuffle would queue points past the budget.
        order_seed = study.user_attrs.get("grid_order_seed")
        if order_seed is None:
            order_seed = plan.seed
            study.set_user_attr("grid_order_seed", order_seed)
        random.Random(order_seed).shuffle(rest)
        return [c for c in (first + rest)[: plan.budget] if c.name not in queued][:GRID_CHUNK], queued

    def trial_params(self, plan, cfg: Config) -> dict:
        return {"index": plan.index_of[cfg.name]}

    def suggest(self, plan, trial) -> Config:
        return plan.valid[trial.suggest_int("index", 0, len(plan.valid) - 1)]
