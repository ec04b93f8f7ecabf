"""Replay: an evaluator that answers from recorded measurements instead of a GPU, so that a
search (its sampler, storage, workers and faults) runs and is tested on any machine.

A replay table is JSON: {"table": {config name: GFLOP/s or a status such as "incorrect"},
"delay_s": seconds per evaluation, "cublas_gflops": ...}; `autotune search --replay FILE`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .limits import DeviceLimits
from .types import Config, Measurement, Problem, Status, UserError


@dataclass
class ReplayEvaluator:
    """Answers from a table of recorded results: name -> GFLOP/s, or name -> Status for failures.

    Configs missing from the table are reported as rejected. `calls` records what was asked,
    so tests can check that nothing is evaluated twice or out of the valid space.
    """

    table: Mapping[str, float | Status]
    limits: DeviceLimits
    cublas_gflops: float = 1000.0
    versions: dict = field(default_factory=lambda: {"replay": True})
    calls: list[str] = field(default_factory=list)
    delay_s: float = 0.0
    on_evaluate: Callable[[Config], None] | None = None

    def prefetch(self, configs: Sequence[Config], problem: Problem) -> None:
        pass

    def first_ready(self, configs: Sequence[Config], problem: Problem) -> int:
        return 0

    def baseline(self, problem: Problem) -> dict:
        t = problem.flops / (self.cublas_gflops * 1e6)
        return {
            "time_ms": t,
            "time_min_ms": t,
            "time_max_ms": t,
            "time_iqr_ms": 0.0,
            "repeats": 1,
            "gflops": self.cublas_gflops,
            "error": 1e-7,
        }

    def evaluate(self, configs: Sequence[Config], problem: Problem, retime: bool = False) -> list[Measurement]:
        out = []
        for cfg in configs:
            self.calls.append(cfg.name)
            if self.on_evaluate:
                self.on_evaluate(cfg)
            if self.delay_s:
                time.sleep(self.delay_s)
            v = self.table.get(cfg.name, Status.REJECTED)
            if isinstance(v, Status):
                out.append(Measurement(cfg, problem, v, "replayed"))
            else:
                t = problem.flops / (v * 1e6)
                out.append(
                    Measurement(
                        cfg,
                        problem,
                        Status.OK,
                        time_ms=t,
                        time_min_ms=t,
                        time_max_ms=t,
                        time_iqr_ms=0.0,
                        repeats=1,
                        gflops=float(v),
                        error=1e-7,
                        registers=64,
                        spill_bytes=0,
                        smem_bytes=0,
                    )
                )
        return out

    def close(self) -> None:
        pass


def load_replay(path: str, limits: DeviceLimits) -> ReplayEvaluator:
    """A ReplayEvaluator from a JSON file: {"table": {config name: GFLOP/s or a status such as
    "incorrect"}, "delay_s": seconds per evaluation, "cublas_gflops": ...}."""
    try:
        data = json.loads(open(path).read())
        table = {k: (Status(v) if isinstance(v, str) else float(v)) for k, v in data["table"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a replay table ({type(exc).__name__}: {exc})") from None
    return ReplayEvaluator(
        table, limits, cublas_gflops=float(data.get("cublas_gflops", 1000.0)), delay_s=float(data.get("delay_s", 0.0))
    )
