"""Shared by the probe scripts (pdl_probe.py, tail_rate.py, split_breakdown.py): the first
warptile seed with overrides, a warptile config compiled and loaded as the runner loads it, and
CUDA-event timing of several launch sequences taking turns. The scripts put the repository
root on sys.path before they import it."""

from __future__ import annotations

from typing import Callable

import cupy as cp

from autotune.gpu.compile import compile_source
from autotune.gpu.runner import LoadedKernel
from autotune.render import DEFAULT_KERNEL, render
from autotune.space import Space
from autotune.types import Config


def seed_params(overrides: str = "", **fixed: int) -> dict:
    """The first warptile seed's params, with `fixed`, then `overrides` ("GROUP_M=8,STAGES=8")."""
    params = {**Space.load("warptile").seeds[0].as_dict(), **fixed}
    params.update({k: int(v) for k, v in (kv.split("=") for kv in overrides.split(",") if kv)})
    return params


def load_warptile(params: dict, edit: Callable[[str], str] | None = None) -> LoadedKernel:
    """The warptile config `params` compiled for this GPU (its source passed through `edit`
    first, if given) and loaded with its launch plan."""
    fam = Space.load("warptile").family
    cfg = Config.make("warptile", params)
    src = render(fam, cfg)
    compiled = compile_source(edit(src) if edit else src, f"sm_{cp.cuda.Device().compute_capability}", DEFAULT_KERNEL)
    return LoadedKernel(compiled.cubin, DEFAULT_KERNEL, fam.launch_plan(cfg))


def interleaved_ms(fns: dict[str, Callable[[], None]], reps: int, calls: int, stream=None) -> dict[str, list[float]]:
    """Per name, `reps` timings (ms per call) of `calls` calls queued back to back between two
    CUDA events on `stream` (the current one if None), the names taking turns in each round."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record(stream)
            for _ in range(calls):
                fn()
            e1.record(stream)
            e1.synchronize()
            times[name].append(cp.cuda.get_elapsed_time(e0, e1) / calls)
    return times
