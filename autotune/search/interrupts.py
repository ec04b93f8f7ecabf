"""SIGINT and SIGTERM held while a measurement is taken and recorded.

A search stopped by either (Ctrl-C, a scheduler's SIGTERM, a search process told to end) then
never ends between the two: a config measured but not recorded in the study would be measured
again when the search resumes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

HELD = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """Catch SIGINT and SIGTERM while entered (main thread); inside `held()` the first one waits.

    Once the block ends, or outside it, the signal acts as it did before: the handler that was there
    (Ctrl-C's KeyboardInterrupt, a search process's SystemExit) or, where there was none, the
    default, the process ended by the signal. A second one inside the block acts at once: whoever
    insists does not wait for the measurement. A signal ignored before (SIGINT in a shell's
    background job) stays ignored; outside the main thread, where Python runs no handler, nothing
    changes.
    """

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}
        self.holding = False
        self.kept: int | None = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in HELD:
                before = signal.getsignal(sig)
                if before in (signal.SIG_IGN, None):  # ignored, or a handler not set from Python
                    continue
                self.previous[sig] = before
                signal.signal(sig, self._caught)
        return self

    def __exit__(self, *exc) -> None:
        for sig, before in self.previous.items():
            signal.signal(sig, before)
        self.previous.clear()

    @contextlib.contextmanager
    def held(self):
        """Return a block that a first SIGINT or SIGTERM does not interrupt until it ends."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            kept, self.kept = self.kept, None
            if kept is not None:
                self._act(kept, None)

    def _caught(self, signum: int, frame) -> None:
        if self.holding and self.kept is None:
            self.kept = signum
            return
        self._act(signum, frame)

    def _act(self, signum: int, frame) -> None:
        before = self.previous.get(signum, signal.SIG_DFL)
        if callable(before):
            before(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
