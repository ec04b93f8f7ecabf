"""Random search: each config drawn at random from the value lists (seeds first)."""

from __future__ import annotations

from .base import Strategy, register


@register
class Random(Strategy):
    """Configs drawn at random from the value lists, after the seeds."""

    name = "random"
    summary = "configs drawn at random"

    def sampler(self, seed: int):
        import optuna

        return optuna.samplers.RandomSampler(seed=seed)
