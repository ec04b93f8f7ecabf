"""Heartbeats, and the recovery of trials left behind by workers that died.

Several workers (processes, GPUs, hosts) share one study through Optuna's RDB storage: each
records heartbeats for its trials in flight, so the trials of a worker that was killed are
failed and re-queued with the same parameters (RetryHeartbeatStaleTrialCallback, set on the
storage by storage.make_storage) and run once by whoever asks next.
"""

from __future__ import annotations

import threading
import time
import warnings
from datetime import datetime, timedelta

import optuna
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.trial import TrialState

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
    # with no heartbeat, which Optuna never calls stale. Live workers name a trial's config
    # within milliseconds of asking, so one still unnamed after the grace period is orphaned.
    # It has no parameters yet: failing it loses nothing.
    cutoff = datetime.now() - timedelta(seconds=GRACE_S)
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if "config" not in t.user_attrs and t.datetime_start is not None and t.datetime_start < cutoff:
            try:
                study.tell(t.number, state=TrialState.FAIL)
            except (ValueError, RuntimeError):
                pass  # told meanwhile


def release(study: optuna.Study, trials: list[optuna.Trial]) -> None:
    """Fail and re-queue the trials this process asked and will not measure (it was interrupted).

    As recover_stale does once a dead worker's trials stop beating, but at once: the next search of
    the study need not wait for them to go stale. Best effort: a trial this leaves running goes
    stale as before.
    """
    storage = getattr(study, "_storage", None)
    callback = getattr(storage, "get_heartbeat_stale_trial_callback", lambda: None)()
    for trial in trials:
        try:
            study.tell(trial, state=TrialState.FAIL)
            if callback is not None:
                callback(study, storage.get_trial(trial._trial_id))
        except Exception:  # noqa: BLE001 - told meanwhile, or the storage failing: it goes stale
            continue
