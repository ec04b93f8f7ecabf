"""Heartbeats, and the recovery of trials left behind by workers that died.

Several workers (processes, GPUs, hosts) share one study through Optuna's RDB storage: each
records heartbeats for its trials in flight, so the trials of a worker that was killed are
failed and re-queued with the same parameters (RetryHeartbeatStaleTrialCallback, set on the
storage by storage.make_storage) and run once by whoever asks next.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from datetime import datetime, timedelta

import optuna
import sqlalchemy
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.storages._rdb import models as rdb_models
from optuna.trial import FrozenTrial, TrialState

HEARTBEAT_S, GRACE_S = 2, 8  # a worker silent for GRACE_S has its trials failed and re-queued
# Heartbeats and the retry callback are marked experimental; they are what makes workers safe.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")


class Heartbeat:
    """Record a heartbeat for every trial this process has in flight, from a thread."""

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
        """Start beating for `trial`."""
        self.ids.add(trial._trial_id)
        if self.storage is not None:
            self.storage.record_heartbeat(trial._trial_id)

    def done(self, trial: optuna.Trial) -> None:
        """Stop beating for `trial`."""
        self.ids.discard(trial._trial_id)

    def close(self) -> None:
        """Stop the heartbeat thread."""
        self._stop.set()


def recover_stale(study: optuna.Study, wait: bool) -> None:
    """Fail (and so re-queue) the trials of workers that stopped beating.

    With `wait`, trials left RUNNING by a killed process are first given the grace period to go stale.
    """
    try:
        fail_stale_trials(study)
        if wait and study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            time.sleep(GRACE_S + HEARTBEAT_S)
            fail_stale_trials(study)
    except (ValueError, NotImplementedError):
        return  # a storage without heartbeats
    # A worker killed between asking a trial and its first heartbeat leaves a RUNNING trial
    # with no heartbeat, which Optuna never calls stale: a queued one already has its config and
    # parameters. Live workers beat within milliseconds of asking, so one with no heartbeat after
    # the grace period is orphaned: failed, and re-queued as a stale one where it has parameters (one
    # without is a sampler's draw that never began: re-queued, it would be asked as an unplanned one).
    cutoff = datetime.now() - timedelta(seconds=GRACE_S)
    old = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if t.datetime_start is not None and t.datetime_start < cutoff
    ]
    beating = _beating(study, [t._trial_id for t in old])
    orphans = [t for t in old if t._trial_id not in beating]
    queued = [t for t in orphans if t.params or "fixed_params" in t.system_attrs]
    release(study, queued)
    for t in orphans:
        if t not in queued:
            with contextlib.suppress(ValueError, RuntimeError):  # told meanwhile
                study.tell(t.number, state=TrialState.FAIL)


def _beating(study: optuna.Study, ids: list[int]) -> set[int]:
    """Return those of trial ids `ids` with a heartbeat recorded (all, where none is kept)."""
    backend = getattr(study._storage, "_backend", study._storage)  # under Optuna's cache
    if not ids or not isinstance(backend, RDBStorage):
        return set(ids)
    beat = rdb_models.TrialHeartbeatModel
    try:
        with backend.engine.connect() as conn:
            return {row[0] for row in conn.execute(sqlalchemy.select(beat.trial_id).where(beat.trial_id.in_(ids)))}
    except sqlalchemy.exc.SQLAlchemyError:
        return set(ids)  # unread: leave them to the heartbeats


def release(study: optuna.Study, trials: list[optuna.Trial | FrozenTrial]) -> None:
    """Fail and re-queue the trials this process asked and will not measure (it was interrupted).

    As recover_stale does once a dead worker's trials stop beating, but at once: the next search of
    the study need not wait for them to go stale. Best effort: a trial this leaves running goes
    stale as before.
    """
    storage = getattr(study, "_storage", None)
    callback = getattr(storage, "get_heartbeat_stale_trial_callback", lambda: None)()
    for trial in trials:
        try:
            study.tell(trial.number, state=TrialState.FAIL)
            if callback is not None:
                callback(study, storage.get_trial(trial._trial_id))
        except Exception:  # noqa: BLE001 - told meanwhile, or the storage failing: it goes stale
            continue
