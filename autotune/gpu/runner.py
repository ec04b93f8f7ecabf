"""The GPU side of an evaluation: verify a kernel against cuBLAS, time it with CUDA events.

Runs inside the worker process (gpu/worker.py), the only place that holds a CUDA context, so a
candidate that faults or hangs takes only the worker down. Everything here returns plain dicts
(they cross a pipe). Kernels are loaded and launched by `launcher.LoadedKernel`; the tensor-core
tiers' accuracy contract is checked with `precision`'s measures.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("CUPY_TF32", "0")  # strict FP32 for the cuBLAS reference and baseline

import cupy as cp
import numpy as np
from cupy_backends.cuda.api import driver, runtime
from cupy_backends.cuda.libs import nvrtc

from ..core.tiers import DEFAULT, TIERS, tier
from ..core.types import Problem
from . import nvml
from .launcher import LoadedKernel
from .precision import contract_errors, contract_input, math_mode, tf32_rounded

_CUDA_ERRORS = (driver.CUDADriverError, runtime.CUDARuntimeError)

# alpha and beta of the verification launch: non-trivial, so a kernel that ignores either fails.
VERIFY_ALPHA, VERIFY_BETA = 1.5, -0.75

_SPIN = r"""
extern "C" __global__ void autotune_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


class FatalGPUError(Exception):
    """The CUDA context is unusable (fault, illegal address): the worker must be replaced."""


def device_info(device_id: int = 0) -> dict:
    """Return the device's name, arch, limits and software versions, as a record keeps them."""
    props = cp.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {
        "name": name,
        "arch": f"sm_{props['major']}{props['minor']}",
        "sm_count": props["multiProcessorCount"],
        "warp_size": props["warpSize"],
        "max_threads_per_block": props["maxThreadsPerBlock"],
        "smem_per_block": props["sharedMemPerBlock"],
        "smem_per_block_optin": props["sharedMemPerBlockOptin"],
        "smem_per_sm": props["sharedMemPerMultiprocessor"],
        "regs_per_block": props["regsPerBlock"],
        "regs_per_sm": props["regsPerMultiprocessor"],
        "l2_bytes": props["l2CacheSize"],
        "threads_per_sm": props["maxThreadsPerMultiProcessor"],
        "blocks_per_sm": props["maxBlocksPerMultiProcessor"],
        "versions": {
            "cuda_runtime": _fmt_cuda(cp.cuda.runtime.runtimeGetVersion()),
            "cuda_driver": _fmt_cuda(cp.cuda.runtime.driverGetVersion()),
            "cupy": cp.__version__,
            "nvrtc": ".".join(map(str, nvrtc.getVersion())),
        },
    }


def _fmt_cuda(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _percentiles(times: list[float]) -> dict:
    a = np.asarray(times)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {
        "time_ms": float(med),
        "time_min_ms": float(a.min()),
        "time_max_ms": float(a.max()),
        "time_iqr_ms": float(q3 - q1),
        "repeats": len(times),
    }


class Runner:
    """Buffers and reference for one problem, and the means to verify and time kernels on it."""

    def __init__(self, device_id: int = 0):
        cp.cuda.Device(device_id).use()
        self.device_id = device_id
        self.info = device_info(device_id)
        self.problem: Problem | None = None
        self.seed = 0
        self.tier, self.contract = TIERS[DEFAULT], None
        spin = cp.RawModule(code=_SPIN)
        self._spin = spin.get_function("autotune_spin")
        self._modules = {}
        try:  # NVML finds the device by its PCI bus id; None: timings without a clock
            self._nvml = nvml.open_device(cp.cuda.Device(device_id).pci_bus_id)
        except _CUDA_ERRORS:
            self._nvml = None

    # ---- problem setup -------------------------------------------------------------------
    def setup(
        self,
        M: int,
        N: int,
        K: int,
        seed: int = 0,
        tolerance: float = 1e-4,
        layout: str = "nn",
        batch: int = 1,
        beta: float = 0.0,
        precision: str = DEFAULT,
    ) -> dict:
        """Make the problem's operands, its float64 reference and the input sets timed in turn.

        Operands are stored in `layout` (A as K x M with a leading t, B as N x K with a second t),
        `batch` of each (contiguous, one after the other) when batch > 1. Timings run with `beta`
        (C read too unless 0); verification runs its own alpha and beta whatever it is. Below the
        strict `precision`, also the data of its accuracy contract (`_contract`).
        """
        problem = Problem(M, N, K, layout, batch, beta, precision)
        if (self.problem, self.seed) == (problem, seed):
            return {"ok": True}
        self.problem, self.seed, self.tolerance = problem, seed, tolerance
        self.tier, self.contract = tier(precision), None
        lead = (batch,) if batch > 1 else ()
        a_shape = lead + ((K, M) if layout[0] == "t" else (M, K))
        b_shape = lead + ((N, K) if layout[1] == "t" else (K, N))
        c_shape = lead + (M, N)
        self.sets = None
        cp.get_default_memory_pool().free_all_blocks()
        rng = cp.random.default_rng(seed)

        def rand(shape):  # uniform in [-1, 1): never zeros, never all positive
            return (rng.random(shape, dtype=cp.float32) * 2 - 1).astype(cp.float32)

        self.A0, self.B0, self.C0 = rand(a_shape), rand(b_shape), rand(c_shape)
        prod64 = self.op(self.A0.astype(cp.float64), self.B0.astype(cp.float64))
        self.ref_ab = prod64
        self.ref_full = VERIFY_ALPHA * prod64 + VERIFY_BETA * self.C0.astype(cp.float64)
        # Rotate input sets so that small problems are not timed out of L2.
        set_bytes = 4 * (M * K + K * N + M * N) * batch
        n_sets = int(min(8, max(1, math.ceil(3 * self.info["l2_bytes"] / set_bytes))))
        # With beta != 0 each timed launch reads the C it scales: numbers there, not whatever
        # the allocator left (repeated launches let them grow; FMA runs at one rate for any value).
        out = (lambda: cp.empty(c_shape, cp.float32)) if beta == 0 else (lambda: rand(c_shape))
        self.sets = [(self.A0, self.B0, out())]
        for _ in range(n_sets - 1):
            self.sets.append((rand(a_shape), rand(b_shape), out()))
        cp.cuda.Device().synchronize()
        cublas_err = self._rel_err(self.op(self.A0, self.B0), self.ref_ab)
        if not self.tier.strict:
            self.contract = self._contract(rng, a_shape, b_shape)
            if self.tier.bar_slack is not None:  # the alpha/beta and NaN checks at the bar's error
                (bar_err,) = self._bar_errors(self.A0, self.B0, lambda out: (self._rel_err(out, self.ref_ab),))
                self.tolerance, cublas_err = max(tolerance, self.tier.bar_slack * bar_err), bar_err
        return {"ok": True, "sets": n_sets, "cublas_error": cublas_err}

    # ---- the accuracy contract of the tensor-core tiers ------------------------------------
    # Errors of a product against the float64 one: the largest |C - ref| over the largest |ref|,
    # and the median over elements of |C - ref| / (|A| |B|) (the error a product of that size can
    # have); a tier's kernels may have at most its `contract` times those of its bar (the cuBLAS
    # it is held to, FP32 or TF32) on the same data.
    CONTRACT_KINDS = ("uniform", "normal", "wide")

    def _contract(self, rng, a_shape, b_shape) -> list[dict]:
        """Return per input kind the operands, float64 product, |A| |B| and the tier's limits."""
        # The kinds: uniform in [-1, 1), normal, and magnitudes spread over 2^-20..2^20 with
        # random signs.
        kinds = []
        for kind in self.CONTRACT_KINDS:
            a, b = (contract_input(rng, kind, shape) for shape in (a_shape, b_shape))
            a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
            ref, scale = self.op(a64, b64), self.op(cp.abs(a64), cp.abs(b64))
            del a64, b64
            cublas_errors = self._bar_errors(a, b, lambda out, ref=ref, scale=scale: contract_errors(out, ref, scale))
            limit = tuple(self.tier.contract * e for e in cublas_errors)
            kinds.append({"kind": kind, "a": a, "b": b, "ref": ref, "scale": scale, "limit": limit,
                          "cublas": cublas_errors})  # fmt: skip
        cp.cuda.Device().synchronize()
        return kinds

    def _bar_errors(self, a, b, measure) -> tuple[float, ...]:
        """Return the errors (`measure` of a product) the tier's bar has on operands a, b."""
        # FP32 cuBLAS's for an FP32 bar. For a TF32 bar, the larger of TF32 cuBLAS's and a true
        # TF32 product's (the operands rounded to TF32, multiplied in FP32): cuBLAS's TF32 mode is
        # free to run FP32 kernels, and does at small and odd shapes.
        if self.tier.bar == "FP32":
            return measure(self._cublas_product(a, b))
        tf32 = measure(self._cublas_product(a, b, tf32=True))
        emulated = measure(self._cublas_product(tf32_rounded(a), tf32_rounded(b)))
        return tuple(max(x, y) for x, y in zip(tf32, emulated, strict=True))

    def _cublas_product(self, a, b, tf32: bool = False):
        """Return op(A) @ op(B) by cuBLAS gemm, in FP32 or with TF32 tensor-core products."""
        # gemm is strided batched for a batch; the handle's math mode is restored after.
        p = self.problem
        out = cp.empty(((p.batch,) if p.batch > 1 else ()) + (p.M, p.N), cp.float32)
        with math_mode(tf32):
            self._gemm_launcher()(a, b, out)
        return out

    def _check_contract(self, launch) -> tuple[str | None, list[dict]]:
        """Return (None or why the kernel misses its tier's contract, each input kind's errors)."""
        # Each kind's row has its errors, limits and cuBLAS's.
        out = self.sets[0][2]
        rows, worse = [], []
        for c in self.contract:
            launch(c["a"], c["b"], out, 1.0, 0.0)
            errs = contract_errors(out, c["ref"], c["scale"])
            rows.append({"kind": c["kind"], "errors": list(errs), "limit": list(c["limit"]),
                         "cublas": list(c["cublas"])})  # fmt: skip
            if any(e > lim for e, lim in zip(errs, c["limit"], strict=True)):
                worse.append(
                    f"{c['kind']}: max {errs[0]:.3g} (limit {c['limit'][0]:.3g}), median {errs[1]:.3g} "
                    f"(limit {c['limit'][1]:.3g})"
                )
        if not worse:
            return None, rows
        t = self.tier
        return (f"misses the {t.name} contract (errors at most {t.contract:g}x cuBLAS {t.bar}'s): "
                + "; ".join(worse)), rows  # fmt: skip

    def op(self, a, b, out=None):
        """Return op(A) @ op(B) by cupy.matmul on transposed views (cuBLAS transposes, no copy)."""
        ta, tb = self.problem.trans
        return cp.matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b, out=out)

    @staticmethod
    def _rel_err(out, ref) -> float:
        if bool(cp.isnan(out).any()) or bool(cp.isinf(out).any()):
            return math.inf
        num = float(cp.linalg.norm(out.astype(cp.float64) - ref))
        den = float(cp.linalg.norm(ref))
        return num / den if den > 0 else num

    # ---- kernels ---------------------------------------------------------------------------
    def _launcher(self, spec: dict):
        """Return `launch(a, b, c, alpha, beta)` for the compiled kernel `spec`, loaded once."""
        name = spec["name"]
        if name not in self._modules:
            if len(self._modules) > 64:
                self._modules.clear()
            self._modules[name] = LoadedKernel(spec["cubin"], spec["kernel"], spec["launch"])
        kernel, p = self._modules[name], self.problem
        M, N, K, batch = p.M, p.N, p.K, p.batch

        def launch(a, b, c, alpha=1.0, beta=0.0):
            kernel.launch(M, N, K, a, b, c, alpha, beta, batch=batch)

        return launch

    def verify(self, spec: dict) -> dict:
        """Return the kernel's relative Frobenius error and whether it is correct (a dict).

        Two launches: (alpha, beta) on a random C, and beta = 0 on a NaN-poisoned C (an element
        left unwritten, or a read of C, shows up as NaN); below strict FP32, the tier's contract.
        Raises FatalGPUError when the launch leaves the CUDA context unusable.
        """
        try:
            launch = self._launcher(spec)
            out = self.sets[0][2]
            out[...] = self.C0
            launch(self.A0, self.B0, out, VERIFY_ALPHA, VERIFY_BETA)
            err_ab = self._rel_err(out, self.ref_full)
            out.fill(np.nan)
            launch(self.A0, self.B0, out, 1.0, 0.0)
            err_0 = self._rel_err(out, self.ref_ab)
            cp.cuda.Device().synchronize()
            reason, contract = None, None
            if self.contract is not None:
                reason, contract = self._check_contract(launch)
                cp.cuda.Device().synchronize()
        except _CUDA_ERRORS as exc:
            raise FatalGPUError(str(exc)) from None
        error = max(err_ab, err_0)
        out = {"error": error, "correct": error <= self.tolerance and reason is None}
        if reason is not None:
            out["reason"] = reason
        if contract is not None:
            out["contract"] = contract  # each input kind's errors against the tier's limits
        return out

    def time(self, spec, target_s: float = 0.25, min_reps: int = 5, max_reps: int = 200) -> dict:
        """Return the median and spread of per-launch CUDA-event times (ms) of `spec`; its clock.

        `spec` is a compiled kernel, or cuBLAS: "matmul" (cupy.matmul on the operands' views;
        beta = 0 only), "gemm" (cupy.cublas.gemm, for a batch cublasSgemmStridedBatched, with the
        transposes named: no copy whatever the layout) or "gemm_tf32"; or any `launch(a, b, c,
        alpha, beta)` callable (benchmarks/launch_floor.py, in git at 6a4c869). Each launch runs
        with alpha 1 and setup's beta.
        """
        beta = self.problem.beta
        if spec == "matmul":
            if beta != 0:
                raise ValueError("cupy.matmul has no beta: time 'gemm' for beta != 0")

            def launch(a, b, c, alpha=1.0, beta=0.0):
                self.op(a, b, out=c)
        elif spec == "gemm_tf32":  # cuBLAS with TF32 tensor-core products: the TF32 bar
            with math_mode(tf32=True):
                return self.time("gemm", target_s, min_reps, max_reps)
        elif spec == "gemm":
            launch = self._gemm_launcher()
        elif callable(spec):
            launch = spec
        else:
            launch = self._launcher(spec)
        sets = self.sets
        try:
            for i in range(2):  # warm-up: module load, clocks, caches
                launch(*sets[i % len(sets)], 1.0, beta)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            launch(*sets[0], 1.0, beta)
            e1.record()
            e1.synchronize()
            est_ms = max(cp.cuda.get_elapsed_time(e0, e1), 1e-3)
            reps = int(min(max_reps, max(min_reps, target_s * 1e3 / est_ms)))
            events = [cp.cuda.Event() for _ in range(reps + 1)]
            # Queue the launches behind a spin kernel, so host-side launch overhead never
            # shows up as GPU idle time inside the measured intervals.
            self._spin((1, 1, 1), (1, 1, 1), (np.uint64(int(min(50e6, 30e3 * reps))),))
            events[0].record()
            for r in range(reps):
                launch(*sets[r % len(sets)], 1.0, beta)
                events[r + 1].record()
            # Read while the launches run, between the first and the last event (not the spin).
            watch = nvml.Sampler(self._nvml).watch
            clock = watch(lambda: events[0].done, lambda: events[-1].done, est_ms * reps / 1e3)
            events[-1].synchronize()
            times = [cp.cuda.get_elapsed_time(events[r], events[r + 1]) for r in range(reps)]
        except _CUDA_ERRORS as exc:
            raise FatalGPUError(str(exc)) from None
        return {**_percentiles(times), **clock}

    def _gemm_launcher(self):
        """Return cuBLAS gemm's launch on the problem's operands, transposes named (no copy)."""
        if self.problem.batch > 1:
            return self._strided_batched
        from cupy import cublas

        ta, tb = ("T" if t == "t" else "N" for t in self.problem.layout)

        def launch(a, b, c, alpha=1.0, beta=0.0):
            cublas.gemm(ta, tb, a, b, out=c, alpha=alpha, beta=beta)

        return launch

    def _strided_batched(self, a, b, c, alpha=1.0, beta=0.0):
        """Run cublasSgemmStridedBatched on contiguous batches, the layout's transposes named."""
        # The row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T.
        from cupy_backends.cuda.libs import cublas

        M, N, K, batch = self.problem.M, self.problem.N, self.problem.K, self.problem.batch
        ta, tb = self.problem.trans  # CUBLAS_OP_N 0, CUBLAS_OP_T 1
        lda, ldb = (M if ta else K), (K if tb else N)
        handle = cp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        al, be = np.array(alpha, np.float32), np.array(beta, np.float32)
        try:
            cublas.sgemmStridedBatched(
                handle, tb, ta, N, M, K, al.ctypes.data, b.data.ptr, ldb, K * N, a.data.ptr, lda, M * K,
                be.ctypes.data, c.data.ptr, N, M * N, batch,
            )  # fmt: skip
        finally:
            cublas.setPointerMode(handle, mode)

    def evaluate(self, spec: dict, target_s: float = 0.25, timed: bool = True) -> dict:
        """Verify the kernel, then (if correct and `timed`) time it: one dict of both."""
        v = self.verify(spec)
        if not v["correct"]:
            return {"status": "incorrect", **v}
        if not timed:
            return {"status": "ok", **v}
        return {"status": "ok", **v, **self.time(spec, target_s)}

    def cublas(self, target_s: float = 0.5) -> dict:
        """Return cuBLAS's time on this problem: its fastest path, and each path's median (`paths`).

        The paths are cupy.matmul and cupy.cublas.gemm (gemm alone with beta != 0: cupy.matmul
        has none); below strict FP32 also gemm with TF32 products ("gemm_tf32"), which is the
        best of a tier with a TF32 bar (one with an FP32 bar is timed against FP32 cuBLAS).
        """
        paths = ("matmul", "gemm") if self.problem.beta == 0 else ("gemm",)
        times = {path: self.time(path, target_s, min_reps=10) for path in paths}
        best = min(times, key=lambda p: times[p]["time_ms"])
        if not self.tier.strict:
            times["gemm_tf32"] = self.time("gemm_tf32", target_s, min_reps=10)
            best = "gemm_tf32" if self.tier.bar == "TF32" else best
        return {**times[best], "path": best, "paths": {p: t["time_ms"] for p, t in times.items()}}
