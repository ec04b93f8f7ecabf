"""Replay: an evaluator that answers from recorded measurements instead of a GPU.

A search (its sampler, storage, workers and faults) so runs and is tested on any machine:
`autotune search --replay FILE`, the file's form given at `load_replay`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.types import Config, Measurement, Problem, Status, UserError
from ..core.yamlio import read_text
from ..kernels.limits import DeviceLimits


@dataclass
class ReplayEvaluator:
    """An evaluator answering from a table of recorded results: name -> GFLOP/s, or name -> Status.

    Configs missing from the table are reported as rejected. `calls` records what was asked, so
    tests can check that nothing is evaluated twice or out of the valid space.
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


_KEYS = ("table", "cublas_gflops", "delay_s")
# A config name as Config.name makes it (family, then _<PARAM><value> pieces): it reaches log
# lines and study attributes, so nothing else gets through.
_NAME = re.compile(r"[a-z][A-Za-z0-9_-]{0,399}")
# GFLOP/s, bounded so that the time computed from them is a positive finite number at any shape
# the kernels take (2 * (2**31 - 1)**3 flops a matrix, 2**31 - 1 matrices).
_GFLOPS = (1e-3, 1e12)
_FAILURES = tuple(s.value for s in Status if s is not Status.OK)
_MAX_DELAY_S = 3600.0


def load_replay(path: str, limits: DeviceLimits) -> ReplayEvaluator:
    """Return a ReplayEvaluator from a JSON replay table.

    The file is {"table": {config name: GFLOP/s or a status such as "incorrect"}, "delay_s": seconds
    per evaluation, "cublas_gflops": ...}. The whole file is checked here: anything else is one
    UserError naming the file and the key.
    """
    text = read_text(path)
    try:
        data = json.loads(text)
    except ValueError as exc:  # RecursionError is not one: a nesting that deep is caught below
        raise UserError(f"{path}: not a replay table (not JSON: {exc})") from None
    except RecursionError:
        raise UserError(f"{path}: not a replay table (JSON nested too deep)") from None
    return ReplayEvaluator(
        _table(path, data),
        limits,
        cublas_gflops=_number(path, "cublas_gflops", data.get("cublas_gflops", 1000.0), *_GFLOPS),
        delay_s=_number(path, "delay_s", data.get("delay_s", 0.0), 0.0, _MAX_DELAY_S),
    )


def _table(path: str, data) -> dict[str, float | Status]:
    def bad(why: str) -> UserError:
        return UserError(f"{path}: not a replay table ({why})")

    if not isinstance(data, dict):
        raise bad(f"a JSON object with {', '.join(_KEYS)} expected, got {type(data).__name__}")
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise bad(f"unknown key {_shown(unknown[0])}; allowed: {', '.join(_KEYS)}")
    if "table" not in data:
        raise bad("no 'table': it maps config names to GFLOP/s or a status")
    if not isinstance(data["table"], dict):
        raise bad(f"'table' must map config names to GFLOP/s or a status, got {type(data.get('table')).__name__}")
    table: dict[str, float | Status] = {}
    for name, value in data["table"].items():
        if not _NAME.fullmatch(name):
            raise bad(f"table key {_shown(name)} is not a config name")
        key = f"table[{_shown(name)}]"
        if isinstance(value, str):
            if value not in _FAILURES:
                raise bad(f"{key} is {_shown(value)}: a status is one of {', '.join(_FAILURES)}")
            table[name] = Status(value)
        else:
            table[name] = _number(path, key, value, *_GFLOPS)
    return table


def _number(path: str, key: str, value, lo: float, hi: float) -> float:
    """Return a finite number in [lo, hi] (lo > 0: a positive one), or a UserError on `key`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi):
        raise UserError(
            f"{path}: not a replay table ({key} is {_shown(value)}, not a number >= {lo:g} and at most {hi:g})"
        )
    return float(value)


def _shown(value) -> str:
    """Return a value as a one-line message shows it: repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
