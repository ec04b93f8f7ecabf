"""Optuna studies: their names, opening one, and reading what its trials have measured.

One study per (GPU, shape, family, space): its name carries a hash of the value lists and the
template text, so a changed space or template never collides with an old study, and the same
command resumes the same study. Several workers share one study (heartbeats.py); each reads what
the others measured through a TrialReader.
"""

from __future__ import annotations

import hashlib
import json

import optuna
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from ..core.types import Problem, Status
from ..kernels.space import Space
from .sqlite import as_read
from .storage import StorageError, storage_failure

optuna.logging.set_verbosity(optuna.logging.WARNING)


def study_name(gpu_slug: str, problem: Problem, space: Space, sampler: str) -> str:
    # The template's text is part of the name: after an edit, the configs measured before are
    # other code and are measured again (a resumed study would skip them).
    # A cold search (no seeds) is kept apart from seeded ones, which would hand it their trials.
    """Return the study's name for a search of `space` for `problem` on this GPU."""
    key = {"values": space.values, "sampler": sampler, "template": space.family.fingerprint}
    # So is one that starts from priors (configs measured on other GPUs).
    key |= {"cold": True} if space.cold else {}
    key |= {"priors": sorted(c.name for c in space.priors)} if space.priors else {}
    blob = json.dumps(key, sort_keys=True)
    return f"{gpu_slug}/{problem.name}/{space.family.name}/{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


def open_study(storage, name: str, sampler) -> optuna.Study:
    """Open the study `name` in `storage`, creating it (maximising GFLOP/s) if need be."""
    try:
        return optuna.create_study(
            study_name=name, storage=storage, sampler=sampler, direction="maximize", load_if_exists=True
        )
    except Exception as exc:  # noqa: BLE001 - whatever the storage raises, the user's URL or file is at fault
        raise StorageError(storage_failure(getattr(storage, "url", storage), exc)) from None


_TOLD = (TrialState.COMPLETE, TrialState.PRUNED)


def measured_configs(study: optuna.Study, trials=None) -> dict[str, tuple[TrialState, float | None]]:
    """Return config name -> (state, value) of every config measured and told in the study.

    By any worker; `trials`: the study's trials where the caller has read them already.
    """
    out = {}
    if trials is None:
        trials = study.get_trials(deepcopy=False, states=_TOLD)
    for t in trials:
        cname = t.user_attrs.get("config")
        if cname and t.user_attrs.get("evaluated") and t.state in _TOLD:
            out[cname] = (t.state, t.value)
    return out


def untold_configs(study: optuna.Study, trials=None) -> dict[str, tuple[TrialState, float | None]]:
    """Return config name -> (state, value) of every config measured and not told.

    The state and value are as its measurement says. Its worker is telling it now, or was stopped
    first (killed, interrupted), and its trial is failed and re-queued with the measurement, to be
    told when it is asked (TrialLoop.settle). Such a config is never queued nor measured again.
    """
    out: dict[str, tuple[TrialState, float | None]] = {}
    if trials is None:  # a re-queued trial's measurement is its failed trial's too
        trials = study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.FAIL))
    for t in trials:
        cname, measurement = t.user_attrs.get("config"), t.user_attrs.get("measurement")
        if cname and t.state not in _TOLD and isinstance(measurement, dict):
            gflops = measurement.get("gflops")
            ok = measurement.get("status") == Status.OK.value and isinstance(gflops, (int, float))
            out.setdefault(cname, (TrialState.COMPLETE, float(gflops)) if ok else (TrialState.PRUNED, None))
    return out


def all_measured(study: optuna.Study) -> dict[str, tuple[TrialState, float | None]]:
    """Return what the study measured, told or not (measured_configs, then untold_configs)."""
    return {**untold_configs(study), **measured_configs(study)}


class TrialReader:
    """Read what changed in a study since the last read: trials new, changed in state, or running.

    A running trial's attributes change: a config is named after the ask. A loop reads the study
    before every config it runs (trials.TrialLoop.refresh); read whole each time, a study of a few
    hundred trials cost 40 ms a read (Optuna's cache reloads every unfinished trial, and a grid's
    queue is hundreds of waiting ones). Here each read lists the ids and states alone, and loads the
    few trials that changed (an RDB storage; another storage is read whole).
    """

    def __init__(self, study: optuna.Study):
        self.study = study
        self.seen: dict[int, TrialState] = {}  # trial id -> state when last loaded

    def changed(self, mine: set[int] = frozenset()) -> list[optuna.trial.FrozenTrial]:
        """Return the trials new or changed since the last call.

        Those of `mine` (trial ids the caller has in flight, which it knows) are left out while running.
        """
        storage = getattr(self.study, "_storage", None)
        storage = getattr(storage, "_backend", storage)  # Optuna's cache in front of an RDB storage
        if not isinstance(storage, RDBStorage):
            return self.study.get_trials(deepcopy=False)
        states = as_read(_trial_states, storage, self.study._study_id)
        ids = {i for i, s in states.items() if (s == TrialState.RUNNING and i not in mine) or self.seen.get(i) != s}
        if not ids:
            return []
        trials = storage._get_trials(self.study._study_id, None, ids, max(states))
        self.seen.update((t._trial_id, t.state) for t in trials)
        return trials


def _trial_states(storage: RDBStorage, study_id: int) -> dict[int, TrialState]:
    """Return trial id -> state of every trial of a study, read in one query of two columns."""
    from optuna.storages._rdb import models
    from sqlalchemy import select

    table = models.TrialModel.__table__
    with storage.engine.connect() as connection:
        rows = connection.execute(select(table.c.trial_id, table.c.state).where(table.c.study_id == study_id))
        return {tid: TrialState[s] if isinstance(s, str) else TrialState(s) for tid, s in rows}
