"""The static filter: the rules a config must pass before it is compiled, and after.

Before: a template's constraints, its architecture, the device's limits on threads and shared
memory. After: the registers and spills ptxas reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .limits import DeviceLimits


@dataclass(frozen=True)
class Constraint:
    """A named rule over a config.

    `check` returns None or the reason it fails; `holds` only whether it passes (the enumeration
    asks millions of times and needs no reason).
    """

    label: str
    names: frozenset[str]  # template names (params or derived) it reads
    check: Callable[[Mapping[str, Any], DeviceLimits], str | None]
    test: Callable[[Mapping[str, Any], DeviceLimits], bool] | None = None

    def holds(self, env: Mapping[str, Any], limits: DeviceLimits) -> bool:
        return self.test(env, limits) if self.test is not None else self.check(env, limits) is None


def template_constraint(expr, why: str) -> Constraint:
    def check(env: Mapping[str, Any], _limits: DeviceLimits) -> str | None:
        if expr(env):
            return None
        values = ", ".join(f"{n}={env[n]}" for n in sorted(expr.names))
        return f"{why} ({expr.text}; {values})"

    return Constraint(expr.text, expr.names, check, lambda env, _limits: bool(expr(env)))


def arch_constraint(arch: str) -> Constraint:
    """Return the rule that a family built for an arch-specific target (sm_90a) runs only there."""

    def check(_env: Mapping[str, Any], lim: DeviceLimits) -> str | None:
        if lim.arch == arch.removesuffix("a"):
            return None
        return f"needs an {arch.removesuffix('a')} device (built for {arch}: wgmma); this one is {lim.arch}"

    return Constraint(f"arch {arch}", frozenset(), check)


def device_constraints() -> list[Constraint]:
    """Return the rules every family obeys, over its declared THREADS and SMEM_BYTES."""

    def threads_max(env, lim):
        t = env["THREADS"]
        return None if t <= lim.max_threads_per_block else f"threads {t} > {lim.max_threads_per_block} per block"

    def threads_warp(env, lim):
        t = env["THREADS"]
        return None if t % lim.warp_size == 0 else f"threads {t} not a multiple of the warp size {lim.warp_size}"

    def smem(env, lim):
        s, dyn = env["SMEM_BYTES"], env["DYNAMIC_SMEM"]
        cap = lim.smem_per_block_optin if dyn else lim.smem_per_block
        kind = "dynamic (opt-in)" if dyn else "static"
        return None if s <= cap else f"smem_bytes {s} > {cap} ({kind} limit)"

    return [
        Constraint("threads per block <= device limit", frozenset({"THREADS"}), threads_max),
        Constraint("threads per block a warp multiple", frozenset({"THREADS"}), threads_warp),
        Constraint("shared memory <= device limit", frozenset({"SMEM_BYTES", "DYNAMIC_SMEM"}), smem),
    ]


def resource_violations(registers: int, spill_bytes: int, threads: int, limits: DeviceLimits) -> list[str]:
    """Return the post-compile part of the static filter's verdict (from the ptxas report)."""
    out = []
    if spill_bytes:
        out.append(f"spills {spill_bytes} bytes to local memory")
    if registers * threads > limits.regs_per_block:
        out.append(f"registers {registers} x threads {threads} = {registers * threads} > {limits.regs_per_block}")
    return out
