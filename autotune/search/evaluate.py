"""Evaluators: Config x Problem -> Measurement.

`GPUEvaluator` renders and compiles in this process (parallel NVRTC, no GPU needed) and runs
each kernel in a worker process that owns the CUDA context (`gpu.worker`): a candidate that
faults or hangs kills only the worker, which is replaced, and the search goes on.
`replay.ReplayEvaluator` answers from recorded measurements, so the search can be tested
without a GPU; `build_evaluator` makes either from a spec.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from ..core.tiers import DEFAULT, meets
from ..core.types import Config, Measurement, Problem, Status
from ..gpu.nvml import clock_fields
from ..gpu.worker import Worker, WorkerLost
from ..kernels.constraints import resource_violations
from ..kernels.family import Family
from ..kernels.limits import DeviceLimits, profile_for_arch
from ..kernels.render import DEFAULT_KERNEL, render
from .replay import load_replay


class Evaluator(Protocol):
    """What measures configs for a search: a GPU (`GPUEvaluator`) or a recorded table (replay)."""

    limits: DeviceLimits
    versions: dict

    def baseline(self, problem: Problem) -> dict:
        """Return cuBLAS on this problem, timed like the candidates: time stats, gflops, error.

        Where the GPU's clock was read, also its SM clock, power and throttling (gpu.nvml.FIELDS).
        """

    def evaluate(self, configs: Sequence[Config], problem: Problem, retime: bool = False) -> list[Measurement]:
        """Measure each config (verify first); never raises for a bad candidate.

        A timed one's extra holds its clock (gpu.nvml.FIELDS) where the GPU's was read.
        """

    def prefetch(self, configs: Sequence[Config], problem: Problem) -> None:
        """Hint that these will be evaluated next (a GPU evaluator compiles them meanwhile)."""

    def first_ready(self, configs: Sequence[Config], problem: Problem) -> int:
        """Return the index of a prefetched config that can run now, waiting for one if none can."""

    def close(self) -> None: ...


def gflops(problem: Problem, time_ms: float) -> float:
    """Return the GFLOP/s of `problem` run in `time_ms`."""
    return problem.flops / (time_ms * 1e6)


@dataclass
class Prepared:
    """A rendered and compiled candidate, or why it never reaches the GPU."""

    config: Config
    spec: dict | None = None
    measurement: Measurement | None = None  # set when rejected or failed before running


def prepare(
    configs: Sequence[Config],
    problem: Problem,
    limits: DeviceLimits,
    arch: str,
    families: dict[str, Family],
    jobs: int | None = None,
) -> list[Prepared]:
    """Render, compile (in parallel) and apply the post-compile static filter to each config."""
    from ..gpu.compile import CompileError, compile_many

    out, todo = [], []
    for cfg in configs:
        if cfg.family not in families:
            families[cfg.family] = Family.load(cfg.family)
        resolved = families[cfg.family].resolve(cfg)
        bad = resolved.family.violations(resolved, limits)
        if resolved.plan.layout != problem.trans:  # the runner stores A and B in the problem's layout
            bad.append(f"built for layout {Problem.layout_of(resolved.plan.layout)}, not {problem.layout}")
        if resolved.plan.batched != (problem.batch > 1):  # a batch is timed as one launch
            batch = problem.batch
            bad.append(
                "built for a batch" if resolved.plan.batched else f"built for one matrix, not a batch of {batch}"
            )
        tier = resolved.env.get("PRECISION", DEFAULT)  # FP32 (no PRECISION) meets every tier
        if not meets(tier, problem.precision):
            bad.append(f"built for precision {tier}, not {problem.precision}")
        if bad:
            out.append(Prepared(cfg, measurement=Measurement(cfg, problem, Status.REJECTED, "; ".join(bad))))
            continue
        out.append(Prepared(cfg))
        todo.append((out[-1], resolved, render(resolved)))
    targets = [(src, DEFAULT_KERNEL, resolved.family.compile_arch(arch)) for _, resolved, src in todo]
    compiled = compile_many(targets, arch, jobs)
    for (prep, resolved, _src), res in zip(todo, compiled, strict=True):
        cfg = prep.config
        if isinstance(res, CompileError):
            prep.measurement = Measurement(cfg, problem, Status.COMPILE_FAILED, str(res)[:500])
            continue
        plan = resolved.plan
        r = res.resources
        smem = r.smem_static_bytes + plan.dynamic_smem
        resources = dict(registers=r.registers, spill_bytes=r.spill_bytes, smem_bytes=smem)
        bad = resource_violations(r.registers, r.spill_bytes, plan.block, limits)
        if bad:
            prep.measurement = Measurement(cfg, problem, Status.REJECTED, "; ".join(bad), **resources)
            continue
        prep.spec = {
            "name": cfg.name,
            "cubin": res.cubin,
            "kernel": DEFAULT_KERNEL,
            "launch": plan,
            "resources": resources,
        }
    return out


def code_of(resolved, arch: str) -> str | None:
    """Return the digest of the machine code `resolved` compiles to for `arch`; None without NVRTC.

    The digest (gpu.machine_code) is what a record names as the kernel it measured. On a GPU the
    compile is the one `prepare` made (cached); a replayed search compiles here.
    """
    from ..gpu.compile import CompileError, NVRTCMissing, compile_source
    from ..gpu.machine_code import code_digest

    try:
        cubin = compile_source(render(resolved), resolved.family.compile_arch(arch), DEFAULT_KERNEL).cubin
    except (NVRTCMissing, CompileError):
        return None
    return code_digest(cubin)


class GPUEvaluator:
    """An evaluator that compiles here and runs each kernel in a worker process on `device_id`.

    Args:
        device_id: The CUDA device the worker uses.
        arch: The target to compile for (default: the device's).
        timeout_s: How long one candidate may run before its worker is replaced.
        tolerance: The relative error a correct candidate may have (a tier's bar may raise it).
        seed: Draws the problem's inputs.
        jobs: Compile threads (default: default_jobs()).
        target_s: Seconds of launches a trial is timed for (at least 5 launches).
        retime_target_s: Seconds of launches a re-time (and cuBLAS's baseline) is timed for.
    """

    def __init__(
        self,
        device_id: int = 0,
        arch: str | None = None,
        timeout_s: float = 30.0,
        tolerance: float = 1e-4,
        seed: int = 0,
        jobs: int | None = None,
        target_s: float = 0.05,
        retime_target_s: float = 0.5,
    ):
        # The timings' defaults: at 4096^3 on the H200, trial medians of 28 launches were within
        # 0.2% of 144-launch re-times for the top 5 configs; 0.05 s (about 14 launches there;
        # their spread was not measured separately) is taken as enough to choose what to re-time,
        # at half the GPU time.
        self.device_id = device_id
        self.worker = Worker(device_id)
        info = dict(self.worker.info)
        self.versions = info.pop("versions")
        self.limits = DeviceLimits(**info)
        self.arch = arch or self.limits.arch
        self.timeout_s, self.tolerance, self.seed = timeout_s, tolerance, seed
        self.target_s, self.retime_target_s = target_s, retime_target_s
        self.families: dict[str, Family] = {}
        self._problem: Problem | None = None
        self.setup_info: dict = {}
        # Each candidate compiles on its own thread while the GPU runs others; the search
        # runs whichever is ready first.
        self._compiler = ThreadPoolExecutor(jobs or default_jobs())
        self._prepared: dict[tuple[str, Problem], Future] = {}

    def prefetch(self, configs: Sequence[Config], problem: Problem) -> None:
        for c in configs:
            if (c.name, problem) in self._prepared:
                continue
            if c.family not in self.families:  # loaded here, not raced for by the threads
                self.families[c.family] = Family.load(c.family)
            self._prepared[(c.name, problem)] = self._compiler.submit(
                prepare, [c], problem, self.limits, self.arch, self.families, 1
            )

    def first_ready(self, configs: Sequence[Config], problem: Problem) -> int:
        self.prefetch(configs, problem)
        futs = [self._prepared[(c.name, problem)] for c in configs]
        if not any(f.done() for f in futs):
            wait(futs, return_when=FIRST_COMPLETED)
        return next(i for i, f in enumerate(futs) if f.done())

    def _prepare(self, configs: Sequence[Config], problem: Problem) -> list[Prepared]:
        self.prefetch(configs, problem)
        return [copy.copy(self._prepared.pop((c.name, problem)).result()[0]) for c in configs]

    def setup(self, problem: Problem) -> None:
        """Make the problem's inputs and reference on the GPU now (else the first call does)."""
        self._ensure(problem)

    def _ensure(self, problem: Problem) -> None:
        if problem != self._problem:
            self.setup_info = self.worker.setup(
                {**problem.as_dict(), "seed": self.seed, "tolerance": self.tolerance},
                timeout_s=600,
            )
            self._problem = problem

    def baseline(self, problem: Problem) -> dict:
        self._ensure(problem)
        t = self.worker.call("cublas", 120, target_s=self.retime_target_s)
        return {**t, "gflops": gflops(problem, t["time_ms"]), "error": self.setup_info.get("cublas_error")}

    def evaluate(
        self, configs: Sequence[Config], problem: Problem, retime: bool = False, verify_only: bool = False
    ) -> list[Measurement]:
        self._ensure(problem)
        target = self.retime_target_s if retime else self.target_s
        results = []
        for prep in self._prepare(configs, problem):
            if prep.measurement is not None:
                results.append(prep.measurement)
                continue
            res = prep.spec["resources"]
            spec = {k: v for k, v in prep.spec.items() if k != "resources"}
            try:
                r = self.worker.call("evaluate", self.timeout_s, spec=spec, target_s=target, timed=not verify_only)
            except WorkerLost as lost:
                results.append(Measurement(prep.config, problem, lost.status, str(lost)[:500], **res))
                continue
            except RuntimeError as exc:
                results.append(Measurement(prep.config, problem, Status.LAUNCH_FAILED, str(exc)[:500], **res))
                continue
            extra = {"contract": r["contract"]} if "contract" in r else {}
            if r["status"] != "ok":
                results.append(
                    Measurement(
                        prep.config,
                        problem,
                        Status.INCORRECT,
                        r.get("reason") or f"relative error {r['error']:.3g} > {self.tolerance:g}",
                        error=r["error"],
                        extra=extra,
                        **res,
                    )
                )
                continue
            if verify_only:
                results.append(Measurement(prep.config, problem, Status.OK, error=r["error"], extra=extra, **res))
                continue
            extra.update(clock_fields(r))  # the SM clock, power and throttling while it was timed
            results.append(
                Measurement(
                    prep.config,
                    problem,
                    Status.OK,
                    time_ms=r["time_ms"],
                    time_min_ms=r["time_min_ms"],
                    time_max_ms=r["time_max_ms"],
                    time_iqr_ms=r["time_iqr_ms"],
                    repeats=r["repeats"],
                    gflops=gflops(problem, r["time_ms"]),
                    error=r["error"],
                    extra=extra,
                    **res,
                )
            )
        return results

    def close(self) -> None:
        self._compiler.shutdown(wait=True, cancel_futures=True)
        self.worker.close()


def default_jobs() -> int:
    """Return the default number of compile threads: the machine's cores, 1 to 16."""
    return max(1, min(16, os.cpu_count() or 1))


def default_window(jobs: int, trials: int) -> int:
    """Return how many trials a search worker keeps in flight, for `jobs` threads and `trials`."""
    # Up to one a compile thread, since compiles, not the GPU, set a search's pace (a warptile
    # compile takes seconds, its run a tenth of one); but no more than an eighth of the budget,
    # since each trial in flight is one that TPE's next ask does not see (with 16 in flight a
    # 30-trial search ended a little lower than with 8, a 128-trial one as high and sooner); and
    # at least 8, so that on a machine of few cores compiled candidates still queue for the GPU.
    return max(8, min(jobs, trials // 8))


def build_evaluator(spec: dict, index: int = 0):
    """Return the evaluator a (worker) process uses: spec["kind"] is "gpu" or "replay"."""
    # A GPU evaluator's device is spec["device"] + `index`: each worker process its own GPU.
    if spec["kind"] == "replay":
        return load_replay(spec["path"], profile_for_arch(spec.get("arch")))
    return GPUEvaluator(
        spec.get("device", 0) + index,
        spec.get("arch"),
        timeout_s=spec.get("timeout_s", 30.0),
        seed=spec.get("seed", 0),
        jobs=spec.get("jobs"),
    )
