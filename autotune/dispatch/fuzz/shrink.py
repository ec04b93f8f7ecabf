"""A failing fuzz run made small, and the one line that runs it again.

`shrink` finds the fewest calls and the simplest case that still fail; `repro_line` writes them as
`autotune fuzz --repro '<json>'`, which `parse_repro` reads back.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence

from ...core.types import UserError
from .case import Case, is_valid


def _simpler(case: Case) -> Iterator[Case]:
    """Yield cases one step simpler than `case`, the biggest simplifications first."""
    r = dataclasses.replace
    for name, plain in (
        ("stream", 0), ("kind", "cupy"), ("special", ""), ("pads", (0, 0, 0)), ("offsets", (0, 0, 0)),
        ("c_major", "row"), ("flags", False), ("alpha", 1.0), ("out", True), ("data", "ints"),
    ):  # fmt: skip
        if getattr(case, name) != plain:
            yield r(case, **{name: plain})
    if case.beta != 0:
        yield r(case, beta=0.0)
    if case.lead_a or case.lead_b:
        yield r(case, lead_a=(), lead_b=())
    for name in ("M", "N", "K"):
        v = getattr(case, name)
        for smaller in dict.fromkeys((1, v // 2, v - 1)):
            if 1 <= smaller < v:
                yield r(case, **{name: smaller})


def shrink(history: Sequence[Case], fails: Callable[[list[Case]], bool], budget: int = 200) -> list[Case] | None:
    """Return the fewest calls, ending in the simplest case, that still fail, or None.

    Args:
        history: the run's cases in order, the last one failed.
        fails: runs the calls it is given in order on fresh state and says whether the last is wrong.
        budget: at most this many runs of `fails`; what is found by then is returned.

    Returns:
        The calls, or None when no tail of up to 128 calls fails again on fresh state (then only
        the whole run, from its seed, shows it).
    """
    runs = 0

    def still(calls: list[Case]) -> bool:
        nonlocal runs
        runs += 1
        return fails(calls)

    calls = None
    for width in (0, 1, 3, 7, 15, 31, 63, 127):  # the shortest tail of the run that fails
        if runs >= budget:
            break
        tail = list(history[-1 - width :])
        if still(tail):
            calls = tail
            break
        if len(tail) == len(history):
            break
    if calls is None:
        return None
    i = 0
    while i < len(calls) - 1 and runs < budget:  # drop the calls that are not needed
        trial = calls[:i] + calls[i + 1 :]
        if still(trial):
            calls = trial
        else:
            i += 1
    progress = True
    while progress and runs < budget:  # then simplify the failing call itself
        progress = False
        for simpler in _simpler(calls[-1]):
            if runs >= budget:
                break
            if is_valid(simpler) and still(calls[:-1] + [simpler]):
                calls = calls[:-1] + [simpler]
                progress = True
                break
    return calls


def repro_line(calls: Sequence[Case]) -> str:
    """Return the one line that runs `calls` again: `autotune fuzz --repro '<json>'`."""
    text = json.dumps([c.to_json() for c in calls], separators=(",", ":"))
    return f"autotune fuzz --repro '{text}'"


def parse_repro(text: str) -> list[Case]:
    """Return the cases of a `--repro` argument (JSON: a case or a list of them)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"--repro: not JSON ({exc})") from None
    except RecursionError:  # a list of lists of ... a few thousand deep
        raise UserError("--repro: JSON nested too deeply (a repro line is a list of flat cases)") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise UserError("--repro: expected a JSON list of cases (as a failure prints it)")
    return [Case.from_json(d) for d in data]
