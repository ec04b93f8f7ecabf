"""The GPU side of an evaluation: load a cubin, verify against cuBLAS, time with CUDA events.

Runs inside the worker process (autotune.search.evaluate), the only place that holds a CUDA context,
so a candidate that faults or hangs takes only the worker down. Everything here returns
plain dicts (they cross a pipe).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import threading

os.environ.setdefault("CUPY_TF32", "0")  # strict FP32 for the cuBLAS reference and baseline

import cupy as cp
import numpy as np
from cupy_backends.cuda.api import driver, runtime
from cupy_backends.cuda.libs import nvrtc

from ..kernels.launch import (
    BATCH_GRID_MAX,
    FLOATS,
    INTS,
    LONGS,
    POINTERS,
    TENSOR_MAPS,
    BoundedCache,
    GeometryCache,
    LaunchPlan,
    Workspaces,
)
from . import tensor_map

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


# Workspaces of loaded kernels (launch.Workspaces): one per (kernel uid, device, stream), so a
# kernel's counters never meet another kernel's packed B or partial sums, and two streams
# running one kernel at once never share one.
WORKSPACE_BUDGET_BYTES = 2 << 30


def _alloc_workspace(nbytes: int, stream) -> cp.ndarray:
    with stream:  # allocated and zeroed in order with the launches that use it
        return cp.zeros(nbytes, dtype=cp.uint8)


def _zero_workspace(ws: cp.ndarray, start: int, stop: int, stream) -> None:
    runtime.memsetAsync(ws.data.ptr + start, 0, stop - start, stream.ptr)


WORKSPACES = Workspaces(_alloc_workspace, _zero_workspace, WORKSPACE_BUDGET_BYTES)
_uids = itertools.count()


class LoadedKernel:
    """A compiled cubin loaded into the current CUDA context: the kernels its launch plan names
    (autotune/kernels/launch.py), their dynamic shared-memory opt-in, and the workspace its launches need."""

    def __init__(self, cubin: bytes, kernel: str, plan: LaunchPlan):
        self.plan = plan
        self.module = cp.cuda.function.Module()
        self.module.load(cubin)
        self.fns = {suffix: self.module.get_function(kernel + suffix) for suffix in plan.kernels}
        self.fn = self.fns[""]
        if plan.batched and plan.kernels != ("",):
            raise ValueError(f"a batched kernel launches alone, but this plan has steps {plan.kernels}")
        if plan.dynamic_smem > 48 * 1024:
            for step in plan.steps:
                if step.dynamic_smem:
                    driver.funcSetAttribute(
                        self.fns[step.kernel].ptr,
                        driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        int(plan.dynamic_smem),
                    )
        per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(self.fn.ptr, plan.block, plan.dynamic_smem)
        # Blocks of this kernel the device holds at once: a grid that waits on itself (stream-K)
        # must not be larger.
        self.slots = int(per_sm) * cp.cuda.Device().attributes["MultiProcessorCount"]
        self.geometry = GeometryCache(plan, self.slots)  # geometry(M, N, K) -> Geometry
        self._prepared = BoundedCache(self._prepare)  # (M, N, K, lda, ldb, ldc) -> (geometry, steps, ints)
        self._lock = threading.Lock()
        self._uid = next(_uids)

    def workspace_key(self, stream=None) -> tuple[int, int, int]:
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        return (self._uid, runtime.getDevice(), stream.ptr)

    def launch(
        self,
        M: int,
        N: int,
        K: int,
        a,
        b,
        c,
        alpha: float = 1.0,
        beta: float = 0.0,
        stream=None,
        pitches=None,
        batch: int = 1,
        strides=None,
    ) -> None:
        """C = alpha * op(A) @ op(B) + beta * C: the plan's launches at this shape, in order.
        `pitches`: (lda, ldb, ldc) in floats; None for contiguous operands in the kernel's layout.
        `batch` > 1: that many products, the matrices of A, B and C `strides` floats apart (None:
        contiguous); a BATCHED kernel runs them in one launch, another one launch each."""
        lda, ldb, ldc = pitches if pitches is not None else self.plan.contiguous_pitches(M, N, K)
        if batch == 1:
            return self._launch(M, N, K, a, b, c, alpha, beta, stream, lda, ldb, ldc)
        sa, sb, sc = strides if strides is not None else (M * K, K * N, M * N)
        a, b, c = a.data.ptr, b.data.ptr, c.data.ptr
        per = BATCH_GRID_MAX if self.plan.batched else 1
        for first in range(0, batch, per):
            at = (a + 4 * first * sa, b + 4 * first * sb, c + 4 * first * sc)
            n = min(per, batch - first)
            self._launch(M, N, K, *at, alpha, beta, stream, lda, ldb, ldc, (n, sa, sb, sc))

    def _launch(self, M, N, K, a, b, c, alpha, beta, stream, lda, ldb, ldc, batch=None) -> None:
        geo, steps, ints = self._prepared(M, N, K, lda, ldb, ldc)
        pb, pc = _address(b), _address(c)
        values = {"A": _address(a), "B": pb, "B_IN": pb, "C": pc, "C_IN": pc, "alpha": alpha, "beta": beta}
        n = 0  # grid z as planned
        if self.plan.batched:
            n, values["stride_a"], values["stride_b"], values["stride_c"] = batch or (1, 0, 0, 0)
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        # The steps' argument slots are shared, and the workspace's zeroed bytes are what this
        # launch needs only until the next one of this kernel: fill, size and launch as one.
        with self._lock:
            if geo.has_workspace:
                v = geo.values
                if v["ws_bytes"]:
                    ws = WORKSPACES.get(self.workspace_key(stream), v["ws_bytes"], v["ws_zeroed"], stream)
                    values["WS"] = ws.data.ptr
                else:
                    values["WS"] = 0
                if v.get("pack_b"):
                    values["B"] = values["B_PACKED"] = values["WS"] + v["pack_b_at"]
                if v.get("pack_c"):
                    values["C"] = values["C_PACKED"] = values["WS"] + v["pack_c_at"]
            if self.plan.tensor_maps is not None:
                # B as the kernel reads it (packed or not)
                maps = self._tensor_maps(M, N, K, values["A"], values["B"], lda, ints["ldb_k"])
                values["TMAP_A"], values["TMAP_B"] = maps
            stream_ptr = stream.ptr
            for step in steps:
                if beta != 0 or not step.beta_only:
                    step.launch(values, stream_ptr, n)

    def _tensor_maps(self, M: int, N: int, K: int, a: int, b: int, lda: int, ldb: int):
        """The maps of A and B as the SGEMM kernel reads them; zeros unless both can have one
        (the kernel tests the same pointers and pitches and copies the tiles itself then)."""
        if not (tensor_map.mappable(a, lda) and tensor_map.mappable(b, ldb)):
            return tensor_map.ZEROS, tensor_map.ZEROS
        (ia, oa), (ib, ob) = self.plan.tensor_map_shapes(M, N, K)
        box_a, box_b = self.plan.tensor_maps
        return tensor_map.cached(a, ia, oa, lda, box_a), tensor_map.cached(b, ib, ob, ldb, box_b)

    def _prepare(self, M: int, N: int, K: int, lda: int, ldb: int, ldc: int):
        """(geometry, its launches as _Step, the integer arguments) at one shape and pitches
        (remembered in _prepared: building them costs more host time than a launch at a small shape)."""
        geo = self.geometry(M, N, K)
        v = geo.values
        ints = dict(M=M, N=N, K=K, lda=lda, ldb=ldb, ldb_k=v["pitch_b"] if v.get("pack_b") else ldb, ldc=ldc)
        ints["ldc_k"], ints["N_k"] = (v["pitch_c"], v["pitch_c"]) if v.get("pack_c") else (ldc, N)
        ints.update({name: v[name] for name in ("pitch_b", "pitch_c", "tail_first") if name in v})
        steps = []
        for step, grid in geo.launches:
            smem = geo.dynamic_smem if step.dynamic_smem else 0
            steps.append(_Step(self.fns[step.kernel].ptr, grid, step.block, smem, step.args, ints, step.beta_only))
        return geo, steps, ints


@contextlib.contextmanager
def _math_mode(tf32: bool):
    """cuBLAS's FP32 gemm with TF32 tensor-core products inside (tf32) or strict, as before."""
    if not tf32:
        yield
        return
    from cupy_backends.cuda.libs import cublas

    handle = cp.cuda.device.get_cublas_handle()
    mode = cublas.getMathMode(handle)
    # CUBLAS_TF32_TENSOR_OP_MATH (cublas_api.h); not every CuPy names it.
    cublas.setMathMode(handle, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
    try:
        yield
    finally:
        cublas.setMathMode(handle, mode)


def _contract_input(rng, kind: str, shape) -> cp.ndarray:
    if kind == "uniform":
        x = rng.random(shape, dtype=cp.float32) * 2 - 1
    elif kind == "normal":
        x = rng.standard_normal(shape, dtype=cp.float32)
    else:  # "wide": 2^U(-20, 20) with a random sign
        sign = cp.where(rng.random(shape, dtype=cp.float32) < 0.5, -1.0, 1.0)
        x = sign * cp.exp2(rng.random(shape, dtype=cp.float64) * 40 - 20)
    return x.astype(cp.float32)


def _tf32_rounded(x) -> cp.ndarray:
    """x rounded to TF32 (10 mantissa bits), to nearest with ties away from zero, as the
    kernels' cvt.rna does (finite inputs)."""
    bits = x.view(cp.uint32)
    return ((bits + cp.uint32(0x1000)) & cp.uint32(0xFFFFE000)).view(cp.float32)


def _errors(out, ref, scale) -> tuple[float, float]:
    """(max |out - ref| / max |ref|, median of |out - ref| / scale); inf for a result with an
    infinity or NaN (none of the contract's inputs has one)."""
    if bool(cp.isnan(out).any()) or bool(cp.isinf(out).any()):
        return math.inf, math.inf
    diff = cp.abs(out.astype(cp.float64) - ref)
    top = float(cp.abs(ref).max())
    return float(diff.max()) / (top if top > 0 else 1.0), float(cp.median(diff / scale))


def _address(x) -> int:
    """A device pointer: a CuPy array's data, or an address already."""
    return x.data.ptr if isinstance(x, cp.ndarray) else int(x)


# Kernel arguments by C type (launch.py's names); the integers of a shape are set once per _Step,
# the others at each launch.
_CTYPES = (
    dict.fromkeys(POINTERS, ctypes.c_uint64)
    | dict.fromkeys(FLOATS, ctypes.c_float)
    | dict.fromkeys(INTS, ctypes.c_int32)
    | dict.fromkeys(LONGS, ctypes.c_int64)
    | dict.fromkeys(TENSOR_MAPS, tensor_map.TensorMap)
)


class _Step:
    """One kernel launch at one shape and pitches, by cuLaunchKernel: its arguments in ctypes
    slots, the array of their addresses made once (the driver copies the values at the launch,
    so the slots can be refilled for the next). Several microseconds less host time a launch
    than CuPy's Function call, which converts every argument each time."""

    __slots__ = ("beta_only", "block", "fn", "grid", "maps", "params", "per_call", "slots", "smem")

    def __init__(self, fn: int, grid: tuple[int, int, int], block: int, smem: int, names, ints, beta_only=False):
        self.fn, self.grid, self.block, self.smem, self.beta_only = fn, grid, block, smem, beta_only
        self.slots = [_CTYPES[n]() for n in names]  # kept alive: params points into them
        for slot, name in zip(self.slots, names, strict=True):
            if name in INTS:
                slot.value = ints[name]
        per_call = [(slot, name) for slot, name in zip(self.slots, names, strict=True) if name not in INTS]
        self.per_call = [(slot, name) for slot, name in per_call if name not in TENSOR_MAPS]
        self.maps = [(slot, name) for slot, name in per_call if name in TENSOR_MAPS]  # copied in by bytes
        array = (ctypes.c_void_p * len(names))(*(ctypes.addressof(s) for s in self.slots))
        self.params = (array, ctypes.addressof(array))

    def launch(self, values: dict, stream_ptr: int, grid_z: int) -> None:
        for slot, name in self.per_call:
            slot.value = values[name]
        for slot, name in self.maps:
            ctypes.memmove(slot, values[name], ctypes.sizeof(slot))
        gx, gy, gz = self.grid
        driver.launchKernel(self.fn, gx, gy, grid_z or gz, self.block, 1, 1, self.smem, stream_ptr, self.params[1], 0)


class Runner:
    """Buffers and reference for one problem, and the means to verify and time kernels on it."""

    def __init__(self, device_id: int = 0):
        cp.cuda.Device(device_id).use()
        self.device_id = device_id
        self.info = device_info(device_id)
        self.problem = None
        self.precision, self.contract = "highest", None
        spin = cp.RawModule(code=_SPIN)
        self._spin = spin.get_function("autotune_spin")
        self._modules = {}

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
        precision: str = "highest",
    ) -> dict:
        """Operands stored in `layout` (A as K x M with a leading t, B as N x K with a second t),
        `batch` of each (contiguous, one after the other) when batch > 1, the float64 reference
        of op(A) @ op(B), and the input sets timing rotates through; timings run with `beta`
        (C read too unless 0; verification runs its own alpha and beta whatever it is). Below the
        highest `precision`, also the data of its accuracy contract (`_contract`)."""
        if self.problem == (M, N, K, seed, layout, batch, beta) and self.precision == precision:
            return {"ok": True}
        self.problem, self.tolerance = (M, N, K, seed, layout, batch, beta), tolerance
        self.precision, self.contract = precision, None
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
        if precision != "highest":
            self.contract = self._contract(rng, a_shape, b_shape)
            if precision == "medium":  # the alpha/beta and NaN checks at TF32's error, not FP32's
                (tf32_err,) = self._bar_errors(self.A0, self.B0, lambda out: (self._rel_err(out, self.ref_ab),))
                self.tolerance, cublas_err = max(tolerance, 3 * tf32_err), tf32_err
        return {"ok": True, "sets": n_sets, "cublas_error": cublas_err}

    # ---- the accuracy contract of the tensor-core tiers ------------------------------------
    # Errors of a product against the float64 one: the largest |C - ref| over the largest |ref|,
    # and the median over elements of |C - ref| / (|A| |B|) (the error a product of that size can
    # have); a tier's kernels may have at most CONTRACT_FACTOR times those of cuBLAS on the same
    # data: FP32 cuBLAS for high, TF32 cuBLAS for medium.
    CONTRACT_FACTOR = 1.5
    CONTRACT_KINDS = ("uniform", "normal", "wide")

    def _contract(self, rng, a_shape, b_shape) -> list[dict]:
        """For each kind of input -- uniform in [-1, 1), normal, and magnitudes spread over
        2^-20..2^20 with random signs -- the operands, the float64 product and |A| |B|, and the
        errors the tier may have there."""
        kinds = []
        for kind in self.CONTRACT_KINDS:
            a, b = (_contract_input(rng, kind, shape) for shape in (a_shape, b_shape))
            a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
            ref, scale = self.op(a64, b64), self.op(cp.abs(a64), cp.abs(b64))
            del a64, b64
            cublas_errors = self._bar_errors(a, b, lambda out, ref=ref, scale=scale: _errors(out, ref, scale))
            limit = tuple(self.CONTRACT_FACTOR * e for e in cublas_errors)
            kinds.append({"kind": kind, "a": a, "b": b, "ref": ref, "scale": scale, "limit": limit,
                          "cublas": cublas_errors})  # fmt: skip
        cp.cuda.Device().synchronize()
        return kinds

    def _bar_errors(self, a, b, measure) -> tuple[float, ...]:
        """The errors (`measure` of a product, a tuple) the tier is held to on operands a, b:
        FP32 cuBLAS's for high. For medium, the larger of TF32 cuBLAS's and a true TF32
        product's (the operands rounded to TF32, multiplied in FP32): cuBLAS's TF32 mode is free
        to run FP32 kernels, and does at small and odd shapes."""
        if self.precision != "medium":
            return measure(self._cublas_product(a, b))
        tf32 = measure(self._cublas_product(a, b, tf32=True))
        emulated = measure(self._cublas_product(_tf32_rounded(a), _tf32_rounded(b)))
        return tuple(max(x, y) for x, y in zip(tf32, emulated, strict=True))

    def _cublas_product(self, a, b, tf32: bool = False):
        """op(A) @ op(B) by cuBLAS gemm (strided batched for a batch), in FP32 or with TF32
        tensor-core products (the handle's math mode, restored after)."""
        M, N, _, _, _, batch, _ = self.problem
        out = cp.empty(((batch,) if batch > 1 else ()) + (M, N), cp.float32)
        with _math_mode(tf32):
            self._gemm_launcher()(a, b, out)
        return out

    def _check_contract(self, launch) -> tuple[str | None, list[dict]]:
        """(None when the kernel meets its tier's contract on every kind of input, else the
        measured errors against their limits; each kind's errors, limits and cuBLAS's)."""
        out = self.sets[0][2]
        rows, worse = [], []
        for c in self.contract:
            launch(c["a"], c["b"], out, 1.0, 0.0)
            errs = _errors(out, c["ref"], c["scale"])
            rows.append({"kind": c["kind"], "errors": list(errs), "limit": list(c["limit"]),
                         "cublas": list(c["cublas"])})  # fmt: skip
            if any(e > lim for e, lim in zip(errs, c["limit"], strict=True)):
                worse.append(
                    f"{c['kind']}: max {errs[0]:.3g} (limit {c['limit'][0]:.3g}), median {errs[1]:.3g} "
                    f"(limit {c['limit'][1]:.3g})"
                )
        if not worse:
            return None, rows
        base = "FP32" if self.precision == "high" else "TF32"
        return (f"misses the {self.precision} contract (errors at most {self.CONTRACT_FACTOR:g}x cuBLAS {base}'s): "
                + "; ".join(worse)), rows  # fmt: skip

    def op(self, a, b, out=None):
        """op(A) @ op(B) by cuBLAS: transposed views (of each matrix of a batch), which
        cupy.matmul hands to cuBLAS as transposes without a copy."""
        ta, tb = (t == "t" for t in self.problem[4])
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
        name = spec["name"]
        if name not in self._modules:
            if len(self._modules) > 64:
                self._modules.clear()
            self._modules[name] = LoadedKernel(spec["cubin"], spec["kernel"], spec["launch"])
        kernel, (M, N, K), batch = self._modules[name], self.problem[:3], self.problem[5]

        def launch(a, b, c, alpha=1.0, beta=0.0):
            kernel.launch(M, N, K, a, b, c, alpha, beta, batch=batch)

        return launch

    def verify(self, spec: dict) -> dict:
        """Relative Frobenius error of two launches: (alpha, beta) on a random C, and beta = 0
        on a NaN-poisoned C (an element left unwritten, or a read of C, shows up as NaN)."""
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
        """Median of per-launch CUDA-event times of a kernel (`spec`), or of cuBLAS: "matmul"
        (cupy.matmul on the operands' views; beta = 0 only) or "gemm" (cupy.cublas.gemm, for a
        batch cublasSgemmStridedBatched, with the transposes named: no copy whatever the
        layout), each launch with alpha 1 and setup's beta; or of any `launch(a, b, c, alpha,
        beta)` given as a callable (benchmarks/launch_floor.py: kernels that do nothing)."""
        beta = self.problem[6]
        if spec == "matmul":
            if beta != 0:
                raise ValueError("cupy.matmul has no beta: time 'gemm' for beta != 0")

            def launch(a, b, c, alpha=1.0, beta=0.0):
                self.op(a, b, out=c)
        elif spec == "gemm_tf32":  # cuBLAS with TF32 tensor-core products: the medium tier's bar
            with _math_mode(tf32=True):
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
            events[-1].synchronize()
            times = [cp.cuda.get_elapsed_time(events[r], events[r + 1]) for r in range(reps)]
        except _CUDA_ERRORS as exc:
            raise FatalGPUError(str(exc)) from None
        return _percentiles(times)

    def _gemm_launcher(self):
        """cuBLAS gemm on the problem's operands, the layout's transposes named (no copy); for a
        batch, cublasSgemmStridedBatched."""
        if self.problem[5] > 1:
            return self._strided_batched
        from cupy import cublas

        ta, tb = ("T" if t == "t" else "N" for t in self.problem[4])

        def launch(a, b, c, alpha=1.0, beta=0.0):
            cublas.gemm(ta, tb, a, b, out=c, alpha=alpha, beta=beta)

        return launch

    def _strided_batched(self, a, b, c, alpha=1.0, beta=0.0):
        """cublasSgemmStridedBatched on contiguous batches, the layout's transposes named: the
        row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T."""
        from cupy_backends.cuda.libs import cublas

        M, N, K, _, layout, batch, _ = self.problem
        ta, tb = (int(t == "t") for t in layout)  # CUBLAS_OP_N 0, CUBLAS_OP_T 1
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
        v = self.verify(spec)
        if not v["correct"]:
            return {"status": "incorrect", **v}
        if not timed:
            return {"status": "ok", **v}
        return {"status": "ok", **v, **self.time(spec, target_s)}

    def cublas(self, target_s: float = 0.5) -> dict:
        """cuBLAS on this problem: the faster of cupy.matmul and cupy.cublas.gemm, both timed
        here (`paths`: each one's median ms); gemm alone with beta != 0 (cupy.matmul has none).
        Below the highest precision also gemm with TF32 products ("gemm_tf32"), which is the
        bar of the medium tier (high's is FP32 cuBLAS, whose accuracy it keeps)."""
        paths = ("matmul", "gemm") if self.problem[6] == 0 else ("gemm",)
        times = {path: self.time(path, target_s, min_reps=10) for path in paths}
        best = min(times, key=lambda p: times[p]["time_ms"])
        if self.precision != "highest":
            times["gemm_tf32"] = self.time("gemm_tf32", target_s, min_reps=10)
            best = "gemm_tf32" if self.precision == "medium" else best
        return {**times[best], "path": best, "paths": {p: t["time_ms"] for p, t in times.items()}}
