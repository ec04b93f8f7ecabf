"""TPE: Optuna's tree-structured Parzen estimator, then neighbours of the best configs."""

from __future__ import annotations

from .base import Strategy, register

TPE_STARTUP = 10  # random trials before the model; asked at once, they need no results
LOCAL_SHARE = 0.4  # this share of the budget (trials or time) goes to neighbours of the best configs


@register
class TPE(Strategy):
    """Optuna's TPE sampler (multivariate, with a constant liar), then neighbours of the best."""

    name = "tpe"
    summary = "a model of the results so far picks the next config; the last 40% go to neighbours of the best"
    random_startup = TPE_STARTUP
    ranks_startup = True
    local_share = LOCAL_SHARE

    def sampler(self, seed: int):
        import optuna

        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=TPE_STARTUP, constant_liar=True, multivariate=True
        )
