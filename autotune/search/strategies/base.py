"""The seam between the trial loop and a search strategy, and the registry `--sampler` reads.

A strategy says how its configs are chosen: the Optuna sampler it asks, and the few things the
plan and the loop do differently for it. They read these attributes and methods, never a
strategy's name, so a new strategy is one module in this folder: a `Strategy` subclass
decorated with `@register`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ...core.types import Config, UserError

if TYPE_CHECKING:
    import optuna


class Strategy:
    """How one kind of search chooses configs.

    The defaults are a plain Optuna sampler whose every ask is one value per parameter; a subclass
    names itself and makes its sampler. Its attributes say what else differs: a start-up drawn at
    random, the cost model's start-up, a neighbour phase, points that come only from the queue.
    """

    name: ClassVar[str]
    summary: ClassVar[str]  # a few words for `search --help`
    # Trials the sampler draws at random before results steer it. They need no results, so they
    # are asked at once (a window this wide); in a shared study a worker waits while the others
    # measure them (an ask would be a random draw of the whole value lists, mostly invalid).
    random_startup: ClassVar[int] = 0
    # With no seeds, start from the configs the static cost model ranks best (cost.startup)
    # instead of random draws, and climb to the best-estimated neighbour first.
    ranks_startup: ClassVar[bool] = False
    # This share of the budget (trials, or time to a deadline) goes to neighbours of the best
    # configs measured (neighbours.py); 0: no neighbour phase.
    local_share: ClassVar[float] = 0.0
    # Every point comes from the study's queue (queue_plan); an ask the queue does not answer is
    # pruned and the plan's next points queued, and none left ends the search.
    queue_only: ClassVar[bool] = False

    def sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        """Return the Optuna sampler this strategy asks, seeded with `seed`."""
        raise NotImplementedError

    def window(self, batch: int, measured: int) -> int:
        """Return the trials to keep in flight, with `measured` configs in the study."""
        return max(batch, self.random_startup - measured)

    def to_queue(self, plan, study: optuna.Study, first: list[Config]) -> tuple[list[Config], set[str]]:
        """Return the configs to queue, in order, and the names of those queued already.

        `first` is the seeds, or the model's start-up; a config queued already is not queued again.
        """
        from optuna.trial import TrialState

        waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        return first, {t.user_attrs.get("config") for t in waiting}

    def trial_params(self, plan, cfg: Config) -> dict:
        """Return the parameters a queued trial of `cfg` carries (what `suggest` reads back)."""
        return cfg.as_dict()

    def suggest(self, plan, trial: optuna.Trial) -> Config:
        """Return the trial's config: one value per parameter.

        A parameter of one value is not asked for: Optuna would store it (one commit each, six of
        warptile's 21) and TPE leaves it out of its model anyway.
        """
        values = plan.space.values
        return Config.make(
            plan.space.family.name,
            {p: trial.suggest_categorical(p, vals) if len(vals) > 1 else vals[0] for p, vals in values.items()},
        )


_REGISTRY: dict[str, type[Strategy]] = {}
DEFAULT = "tpe"  # what a search uses unless told (`--sampler`)


def register(cls: type[Strategy]) -> type[Strategy]:
    """Make a strategy a choice of `--sampler` (a class decorator)."""
    known = _REGISTRY.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"two strategies named {cls.name!r}: {known.__qualname__} and {cls.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    """Return the registered strategies' names, in registration order."""
    return list(_REGISTRY)


def get(name: str) -> Strategy:
    """Return a new strategy of the registered `name`; an unknown name is a UserError."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UserError(f"unknown sampler {name!r}; choose from {', '.join(_REGISTRY)}")
    return cls()
