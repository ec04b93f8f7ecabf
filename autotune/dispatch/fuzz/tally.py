"""What a fuzz run found, per regime: problems run and wrong, the worst error against its bound."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .case import COVERAGE, Case


@dataclass
class Tally:
    """Problems run and wrong, per regime, and the largest error seen as a fraction of its bound."""

    run: dict[str, int] = field(default_factory=dict)
    wrong: dict[str, int] = field(default_factory=dict)
    worst: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, case: Case, ok: bool, ratio: float, seconds: float = 0.0) -> None:
        """Count one case: its regime (a coverage case's by family), verdict, error ratio, time."""
        key = case.regime if case.regime != COVERAGE else f"{COVERAGE}:{case.config['family']}"
        self.run[key] = self.run.get(key, 0) + 1
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        if not ok:
            self.wrong[key] = self.wrong.get(key, 0) + 1
        if math.isfinite(ratio):
            self.worst[key] = max(self.worst.get(key, 0.0), ratio)

    @property
    def total(self) -> int:
        """Return the problems run, all regimes together."""
        return sum(self.run.values())

    @property
    def total_wrong(self) -> int:
        """Return the problems wrong, all regimes together."""
        return sum(self.wrong.values())

    def table(self) -> str:
        """Return the counts as a table for the terminal, a row per regime and the total."""
        rows = [f"{'regime':<22} {'problems':>9} {'wrong':>6} {'worst error / bound':>20} {'ms a problem':>13}"]
        for key in sorted(self.run):
            worst = self.worst.get(key)
            rows.append(
                f"{key:<22} {self.run[key]:>9} {self.wrong.get(key, 0):>6} "
                f"{'-' if worst is None else f'{worst:.3g}':>20} {1e3 * self.seconds[key] / self.run[key]:>13.1f}"
            )
        rows.append(f"{'total':<22} {self.total:>9} {self.total_wrong:>6}")
        return "\n".join(rows)
