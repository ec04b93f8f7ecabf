"""The live status line of a search."""

from __future__ import annotations

import sys
import time

from ..core.types import Status


class Progress:
    """A live status line: configs measured, best so far (GFLOP/s and x cuBLAS), rejections, ETA.

    Rewritten in place on a terminal, a line per batch otherwise.
    """

    def __init__(self, stream=None, enabled: bool = True, cublas_gflops: float | None = None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.cublas_gflops = cublas_gflops
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def note(self, line: str) -> None:
        """Print a line of its own (as the families' order), where the status line is shown."""
        if self.enabled:
            self.stream.write(line + "\n")
            self.stream.flush()

    def update(
        self,
        family: str,
        done: int,
        budget: int,
        best: float | None,
        cublas: float | None,
        counts: dict,
        started: float,
        final: bool = False,
        deadline: float | None = None,
    ) -> None:
        """Redraw the line.

        Args:
            deadline: Where the clock rather than the budget ends the search (a search bounded by
                --timeout alone has the whole valid space as its budget): the bar and ETA follow the
                time left and the count stands alone.
        """
        if not self.enabled:
            return
        cublas = cublas or self.cublas_gflops
        now = time.monotonic()
        elapsed = now - started
        eta = elapsed / done * (budget - done) if done and not final else 0.0
        left = max(0.0, deadline - now) if deadline is not None else None
        timed = left is not None and done < budget and (final or not done or eta > left)
        share = min(done, budget) / budget if budget else 1.0
        if timed:
            eta = 0.0 if final else left
            share = 1.0 if final else elapsed / max(elapsed + left, 1e-9)
        width = 20
        filled = int(width * share)
        bar = "#" * filled + "." * (width - filled)
        count = f"{done:3d}" if timed else f"{done:3d}/{budget}"
        best_s = f"{best:7.0f} GFLOP/s" if best else "      - GFLOP/s"
        ratio = f" {best / cublas:4.2f}x cuBLAS" if best and cublas else ""
        rejected = counts.get(Status.REJECTED.value, 0)
        failed = sum(v for k, v in counts.items() if k not in (Status.OK.value, Status.REJECTED.value))
        line = (
            f"[{family:>10}] [{bar}] {count}  best {best_s}{ratio}  rejected {rejected} "
            f"failed {failed}  {elapsed:5.1f}s  eta {eta:4.0f}s"
        )
        if self.tty and not final:
            self.stream.write("\r" + line)
        else:
            self.stream.write(("\r" if self.tty else "") + line + "\n")
        self.stream.flush()
