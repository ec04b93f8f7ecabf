"""Tuned kernels from Python: `autotune.matmul(A, B)` and `autotune.load(...)`.

A call runs the shape's own tuned record for this GPU, else the stored config that dispatch/model.py
predicts fastest there, else a family's fallback config; table.py chooses it, kernel.py compiles,
verifies (against cuBLAS, once per device) and launches it.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from pathlib import Path
from typing import Any

from ..core.types import PRECISIONS, Config, NoGPUError, Problem, UserError
from ..kernels.family import Family, cached_family
from ..kernels.limits import DeviceLimits, gpu_slug, profile_for_arch
from ..kernels.space import Space
from . import measure, routes, shortcut
from .kernel import Kernel, gpu_arrays
from .table import built_for, table_for

# For a shape with no tuned result: the named fallback config of these families (configs/*.yaml),
# correct everywhere; warptile needs cp.async (sm_80 and newer), older parts get float4 tiles.
_FALLBACK_FAMILY = {"sm_80": "warptile", "older": "vectorized"}


# A call costs about what calling the loaded kernel does: the device's name and arch are read once
# per device, a GPU's results folder once per change of that folder (one stat a call tells, in
# table.py), and the kernel chosen for each (device, shape, layout, batch, family, folder) is kept.
_CACHE: dict[tuple[int, str], Kernel] = {}  # (device, config name) -> its kernel
_DEVICES: dict[int, tuple[str, str]] = {}  # device -> (results-folder slug, arch), read once each
_LIMITS: dict[int, DeviceLimits] = {}  # device -> its limits, read once each


def _device_props(dev: int) -> tuple[str, str]:
    """Return the device's (results-folder slug, arch), asked once per device."""
    props = _DEVICES.get(dev)
    if props is None:
        from ..gpu.runner import device_info

        info = device_info(dev)
        props = _DEVICES[dev] = (gpu_slug(info["name"]), info["arch"])
    return props


def _device_limits(dev: int, arch: str) -> DeviceLimits:
    """Return the device's limits, or the built-in profile of its arch where it cannot be asked."""
    # The limits are what a config built for another layout, batching or tier must fit.
    limits = _LIMITS.get(dev)
    if limits is None:
        try:
            from ..gpu.runner import device_info

            info = dict(device_info(dev))
            info.pop("versions", None)
            limits = DeviceLimits(**info)
        except Exception:  # noqa: BLE001 - no CuPy or device (tests of the choice): the profile
            limits = profile_for_arch(arch)
        _LIMITS[dev] = limits
    return limits


def _choose(dev: int, problem: Problem, family: str | None = None, results: str | Path | None = None) -> Kernel:
    """Return the kernel for this device and problem, of `family` if given, from `results`."""
    # The key is the problem's shape, layout, batch, beta 0 or not and tier: a dict lookup once
    # seen, as long as this GPU's results folder is unchanged (default folder: results_dir()).
    slug, arch = _device_props(dev)
    table = table_for(results, slug)
    p = problem
    key = (dev, p.M, p.N, p.K, p.layout, p.batch, p.beta != 0, family, p.precision)
    kernel = table.choices.get(key)
    if kernel is None:
        if family is not None and (gaps := cached_family(family).gaps(problem)):
            raise UserError(gaps[0])
        found = table.choose(problem, family, _device_limits(dev, arch))

        def fallback() -> Kernel:
            cfg = built_for(fallback_config(arch, family), p.layout, p.batch, p.precision)
            return _kernel(cfg, dev, arch, "fallback config")

        if found is not None:
            tuned, _, cfg, predicted = found
            how = "" if predicted is None else f", predicted fastest here ({1e3 * predicted:.1f} us)"
            kernel = _kernel_or(fallback, cfg, dev, arch, f"tuned for {tuned.name} on {slug}{how}")
        else:
            kernel = fallback()
        route = (table.routes.get(p.with_beta(0.0)) or {}).get(routes.NAME)
        if family is None and routes.usable(p, arch) and routes.faster(route) and routes.enabled():
            ratio = route["versus_ms"] / route["time_ms"]
            kernel = routes.Routed(kernel, route["advantage"], dev, f" (measured {ratio:.2f}x it)")
        table.remember(key, kernel)
    return kernel


def _settled(ops, problem: Problem, alpha: float, beta: float) -> tuple[Any, bool]:
    """Return (matmul's kernel for the call, whether it is settled): a first call's fastest.

    Not settled: a call captured into a CUDA graph, which runs the model's pick untimed (measure.py).
    """
    # A dict lookup once settled. The first call of a key times the model's likeliest kernels
    # and cuBLAS on its own operands; a call being captured into a CUDA graph, which cannot be
    # timed, runs the model's pick and leaves the choice to the next call.
    dev = ops.device
    slug, arch = _device_props(dev)
    table = table_for(None, slug)
    p = problem
    key = (dev, p.M, p.N, p.K, p.layout, p.batch, p.beta != 0, p.precision)
    kernel = table.settled.get(key)
    if kernel is not None:
        return kernel, True
    kernel = _choose(dev, problem)
    count = measure.kernels_to_time()
    if count and not getattr(kernel, "routed", False) and min(p.M, p.N, p.K) > 0:
        if measure.capturing(ops.stream):
            return kernel, False
        contenders = [kernel]
        for cfg in table.likeliest(problem, _device_limits(dev, arch), count) if count > 1 else ():
            if len(contenders) < count and cfg.name != kernel.config.name:
                try:
                    how = f"of the {count} the model predicts fastest here on {slug}, timed fastest at the first call"
                    contenders.append(_kernel(cfg, dev, arch, how))
                except Exception:  # noqa: BLE001 - one that cannot run here is not timed
                    continue
        contenders.append(measure.CublasKernel(kernel, " (timed fastest at the first call)"))
        try:
            kernel = measure.fastest(contenders, ops, alpha, beta)[0]
        except MemoryError:  # no room for a scratch C (beta != 0): the model's pick, untimed
            pass
    table.settle(key, kernel)
    return kernel, True


def _kernel_or(fallback, cfg: Config, dev: int, arch: str, source: str) -> Kernel:
    """Return the config's kernel, or the fallback's with a warning where it cannot run here."""
    # A stored config from another driver or build may not compile, load or pass its check on this
    # device: a call is never answered by a kernel that failed its check, nor refused for it.
    try:
        return _kernel(cfg, dev, arch, source)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - compile, driver and check failures alike
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        warnings.warn(
            f"autotune: {cfg.name} ({source}) cannot run here ({text}); using the fallback config",
            RuntimeWarning,
            stacklevel=4,
        )
        return fallback()


def _kernel(cfg: Config, dev: int, arch: str, source: str) -> Kernel:
    """Return the config's kernel, compiled and verified once per device, labelled with `source`."""
    # Each choice keeps its own `source`: one config can be a shape's own record and another
    # shape's prediction.
    key = (dev, cfg.name)
    kernel = _CACHE.get(key)
    if kernel is None:
        kernel = Kernel(cfg, arch, source)
        kernel.verify()
        _CACHE[key] = kernel
    if kernel.source != source:
        kernel = copy.copy(kernel)  # the same compiled module and launch caches, another label
        kernel.source = source
    return kernel


def fallback_config(arch: str, family: str | None = None) -> Config:
    """Return the named fallback config of `family`, or of the default family for `arch` (sm_90)."""
    fam = family or _FALLBACK_FAMILY["sm_80" if int(arch.split("_")[1].rstrip("a")) >= 80 else "older"]
    return _fallback(fam)


@functools.cache
def _fallback(fam: str) -> Config:
    """Return the fallback config that family `fam`'s space declares."""
    # Read once a process, as the families' declarations are (cached_family): a space's file takes
    # longer to parse than a call takes to run.
    space = Space.load(fam)
    if space.fallback is None:
        raise UserError(f"{space.source}: family {fam} declares no fallback config")
    return space.fallback


def load(
    shape: Any = None,
    *,
    config: Config | dict | None = None,
    family: str | None = None,
    results: str | Path | None = None,
) -> Kernel:
    """Return a compiled kernel on the current device, verified against cuBLAS.

    Args:
        shape: a Problem, a 'MxNxK' string such as '512x512x512_nt_b64', or an (M, N, K) tuple:
            the kernel chosen as `matmul` chooses it for that shape, layout and batch. None (with
            no `config`): the fallback config.
        config: a Config (or {"family": ..., "params": {...}}) to load instead of a stored one.
        family: only that family's records and fallback.
        results: the results folder (default: results_dir()).

    Returns:
        A Kernel, callable as kernel(A, B, out=None, alpha=1.0, beta=0.0).

    Raises:
        UserError: a bad shape or config, or a damaged record in `results`.
        NoGPUError: no CUDA device to run on.
    """
    cfg = _explicit_config(config) if config is not None else None  # checked before the GPU is asked
    problem = _shape(shape) if config is None and shape is not None else None
    arrays = gpu_arrays()
    try:
        dev = arrays.current_device()
        slug, arch = _device_props(dev)
        arrays.bind_context()  # the kernel's module is loaded through the driver, on this thread
    except RuntimeError as exc:
        if (missing := _no_gpu(exc)) is None:
            raise
        raise missing from exc
    if cfg is not None:
        return _kernel(cfg, dev, arch, "explicit config")
    if problem is None:
        return _kernel(fallback_config(arch, family), dev, arch, "fallback config")
    return _choose(dev, problem, family, results)


def _explicit_config(config: Any) -> Config:
    """Return `config` (a Config or a {"family", "params"} dict) as a Config its family accepts."""
    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, dict) and {"family", "params"} <= set(config):
        cfg = Config.make(config["family"], config["params"])
    else:
        raise UserError(f"config must be a Config or {{'family': ..., 'params': {{...}}}}, got {config!r}")
    Family.load(cfg.family).validate_params(cfg.as_dict(), cfg.name)
    return cfg


def _shape(shape: Any) -> Problem:
    """Return `shape` (a Problem, an (M, N, K) tuple or a 'MxNxK...' string) as a Problem."""
    if isinstance(shape, Problem):
        return shape
    if isinstance(shape, (tuple, list)):
        if len(shape) != 3:
            raise UserError(f"shape {shape!r}: expected (M, N, K)")
        return Problem(*shape)
    return Problem.parse(str(shape))


# A call's Problem, checked and made once per distinct (shape, layout, batch, beta, tier): making
# one each call would add about 2 us to a dispatch that adds 4-5 us to a launch. `typed`, so that
# beta=True is refused as Problem refuses it, not served as the Problem of beta 1.
_problem = functools.lru_cache(maxsize=1024, typed=True)(Problem)


# Under torch.compile a call on torch tensors is traced, not run: the package's root sets this to
# the pytorch layer's route (the custom operators, which a graph can hold), so that this layer
# names none above it.
traced: Any = None


def matmul(
    A,
    B,
    out=None,
    alpha: float = 1.0,
    beta: float = 0.0,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    precision: str = "highest",
):
    """Compute C = alpha * op(A) @ op(B) + beta * C in float32 with the kernel tuned for this GPU.

    Args:
        A: a float32 (..., M, K) array on the current device: CuPy, a PyTorch CUDA tensor, or any
            array with `__cuda_array_interface__` or `__dlpack__`. Only read: in place where each
            matrix has a contiguous axis (a transposed view, Fortran order, a row slice), else copied.
        B: a float32 (..., K, N) array of the same kinds. More than two dimensions are a batch,
            broadcast as in cupy.matmul and run as one strided batched launch.
        out: the (..., M, N) array to write, or None for a new one (then beta must be 0).
        alpha, beta: the scales; with beta = 0, `out` is never read.
        trans_a, trans_b: op(X) is X.T (of the last two axes) when set, else X.
        precision: as torch.set_float32_matmul_precision: "highest" is strict FP32; "high" may run
            kernels searched with `--precision high` (errors at most 1.5x FP32 cuBLAS's), "medium"
            those of `--precision medium` (at most 1.5x TF32 cuBLAS's).

    Returns:
        `out`, or a new array of A's kind (torch, Numba, else CuPy), on torch's current stream
        for torch tensors (under torch.compile, the custom operator autotune::matmul), else CuPy's.

    Raises:
        TypeError: a host array (NumPy, a CPU tensor) or a dtype other than float32.
        ValueError: shapes that do not chain, beta != 0 with no `out`, or `out` overlapping A or B.
        UserError: an unknown `precision`, or a damaged record in the results folder.
        NoGPUError: no CUDA device to run on.

    Example:
        C = autotune.matmul(X, W.T)  # the "nt" layout: W is read in place, transposed
    """
    if (types := shortcut.torch_types()) and type(A) in types and traced is not None and shortcut.compiling():
        return traced(A, B, out, alpha, beta, trans_a, trans_b, precision)
    arrays = gpu_arrays()
    try:
        table = key = None
        if type(A) in (kinds := (arrays.NDARRAY, *types)) and type(B) in kinds and (out is None or type(out) in kinds):
            table, key, cut = _shortcut_for(arrays, A, B, out, beta, trans_a, trans_b, precision)
            if cut is not None and _plain(beta, out) and (got := cut(A, B, alpha, out, beta)) is not None:
                return got
        if precision not in PRECISIONS:
            raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        ops = arrays.prepare(A, B, out, beta, trans_a, trans_b)
        kernel, done = _settled(ops, _problem(ops.M, ops.N, ops.K, ops.layout, ops.batch, beta, precision), alpha, beta)
        result = kernel._launch(ops, alpha, beta)
        if key is not None and done and shortcut.fits(A, B, ops, kernel, out):  # the next skips placement and choice
            shortcut.remember(table, key, shortcut.made(A, B, out, kernel, ops))
        return result
    except RuntimeError as exc:  # free when nothing is raised: a call costs no check of the device
        _raise_unless_bound(arrays, exc)
    # The call failed before its first launch on a thread without a CUDA context, which has one now.
    return matmul(A, B, out, alpha, beta, trans_a=trans_a, trans_b=trans_b, precision=precision)


# Told of each call cached_product's shortcut served, as (shortcut, A, B, trans_a, trans_b,
# precision): the C++ road (pytorch/native.py) arms its plan from it.
on_shortcut_hit = None


def cached_product(A, B, alpha: float, trans_a: bool, trans_b: bool, precision: str):
    """Return alpha op(A) op(B) for two plain torch tensors by a cached launch, or None for a miss.

    For callers that have made sure the call is eager (not traced) on plain tensors: the PyTorch
    layer's eager road. A hit stands for every check of the full road (see dispatch/shortcut.py),
    so the caller's own can wait for a miss; on a miss, call `matmul`.
    """
    arrays = gpu_arrays()
    try:
        cut = _shortcut_for(arrays, A, B, None, 0.0, trans_a, trans_b, precision)[2]
        if cut is None:
            return None
        C = cut(A, B, alpha)
        if on_shortcut_hit is not None:
            on_shortcut_hit(cut, A, B, trans_a, trans_b, precision)
        return C
    except RuntimeError as exc:
        _raise_unless_bound(arrays, exc)
    return cached_product(A, B, alpha, trans_a, trans_b, precision)  # as matmul: the context bound


def _shortcut_for(arrays, A, B, out, beta, trans_a: bool, trans_b: bool, precision: str):
    """Return (the results table, the call's shortcut key, the shortcut kept for it or None)."""
    dev = arrays.current_device()
    table = table_for(None, _device_props(dev)[0])
    key = shortcut.key(A, B, out, beta, trans_a, trans_b, precision, dev)
    return table, key, table.shortcuts.get(key)


def _plain(beta, out) -> bool:
    """Whether the full road takes this beta: a finite number (Problem's check), 0 with no `out`."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float)):
        return False
    return beta == 0 if out is None else math.isfinite(beta)


def _raise_unless_bound(arrays, exc: RuntimeError) -> None:
    """Raise `exc` (a NoGPUError where CUDA has no device) unless a context was bound for the call.

    A thread that had no current CUDA context has one now (arrays.bind_context): the call is worth
    one more try.
    """
    if (missing := _no_gpu(exc)) is not None:
        raise missing from exc
    if not arrays.bind_context():
        raise exc


def _no_gpu(exc: RuntimeError) -> NoGPUError | None:
    """Return a NoGPUError when `exc` came because CUDA has no device to run on, else None."""
    # CuPy's error for a missing device says only what CUDA said.
    why = None if isinstance(exc, UserError) else gpu_arrays().no_device()
    if why is None:
        return None
    return NoGPUError(
        f"no CUDA GPU: {why}; autotune.load and autotune.matmul run kernels on one "
        "('autotune search --dry-run' and 'autotune check --static' work without)"
    )
