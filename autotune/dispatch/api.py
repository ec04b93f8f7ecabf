"""Tuned kernels from Python: `autotune.matmul(A, B)` and `autotune.load(...)`.

`matmul` dispatches on the current GPU and the shape: the stored result of that shape when it
was tuned for this GPU (results/<gpu>/), else the stored config that autotune.dispatch.model predicts
fastest there (every family's best at every tuned shape, its measured time carried over by
occupancy, wave quantisation and the roofline), else a sound default config. Each kernel is
verified against cuBLAS on a small awkward problem the first time it is loaded on a device.

A call costs about what calling the loaded kernel does: the device's name and arch are read once
per device, a GPU's results folder once per change of that folder (one stat a call tells), and
the kernel chosen for each (device, shape, layout, batch, family, folder) is remembered.

The stored config is chosen by autotune.dispatch.table; kernel.py compiles, checks and launches it.
"""

from __future__ import annotations

import copy
import functools
import warnings
from pathlib import Path
from typing import Any

from ..core.types import PRECISIONS, Config, NoGPUError, Problem, UserError
from ..kernels.family import Family, cached_family
from ..kernels.limits import DeviceLimits, gpu_slug, profile_for_arch
from ..kernels.space import Space
from .kernel import Kernel, gpu_arrays
from .table import built_for, table_for

# For a shape with no tuned result: the named fallback config of these families (configs/*.yaml),
# correct everywhere; warptile needs cp.async (sm_80 and newer), older parts get float4 tiles.
_FALLBACK_FAMILY = {"sm_80": "warptile", "older": "vectorized"}


_CACHE: dict[tuple[int, str], Kernel] = {}  # (device, config name) -> its kernel
_DEVICES: dict[int, tuple[str, str]] = {}  # device -> (results-folder slug, arch), read once each
_LIMITS: dict[int, DeviceLimits] = {}  # device -> its limits, read once each


def _device_props(dev: int) -> tuple[str, str]:
    props = _DEVICES.get(dev)
    if props is None:
        from ..gpu.runner import device_info

        info = device_info(dev)
        props = _DEVICES[dev] = (gpu_slug(info["name"]), info["arch"])
    return props


def _device_limits(dev: int, arch: str) -> DeviceLimits:
    """The device's limits (what a config built for another layout, batching or tier must fit),
    or, where it cannot be asked, the built-in profile of its arch."""
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
    """The kernel for this device and problem (its shape, layout, batch, beta 0 or not, and
    precision tier), of `family` if given, from the records in `results` (default: results_dir()):
    a dict lookup once they were seen, as long as this GPU's results folder is unchanged."""
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
        table.remember(key, kernel)
    return kernel


def _kernel_or(fallback, cfg: Config, dev: int, arch: str, source: str) -> Kernel:
    """The chosen config's kernel; where it does not compile, load or pass its check on this
    device (a stored config from another driver or build), the fallback config's, with a warning:
    a call is never answered by a kernel that failed its check, nor refused for it."""
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
    """The config's kernel, compiled and verified once per device; each choice keeps its own
    `source` (one config can be a shape's own record and another shape's prediction)."""
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
    """The named fallback config of `family`, or of the default family for `arch` (e.g. sm_90)."""
    fam = family or _FALLBACK_FAMILY["sm_80" if int(arch.split("_")[1].rstrip("a")) >= 80 else "older"]
    return _fallback(fam)


@functools.cache
def _fallback(fam: str) -> Config:
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
    """A compiled, verified kernel on the current device.

    Args:
        shape: MxNxK (a Problem, a 'MxNxK' string such as '512x512x512_nt_b64', or an (M, N, K)
            tuple): the stored best config of the nearest tuned shape for this GPU (family: only
            that family's), built for that shape's layout and batch.
        config: a Config (or {"family": ..., "params": {...}}) to load instead.
        results: the results folder (default: see results_dir()).
    Returns:
        Kernel, callable as kernel(A, B, out=None, alpha=1.0, beta=0.0).
    """
    cfg = _explicit_config(config) if config is not None else None  # checked before the GPU is asked
    problem = _shape(shape) if config is None and shape is not None else None
    arrays = gpu_arrays()
    try:
        dev = arrays.current_device()
        slug, arch = _device_props(dev)
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
    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, dict) and {"family", "params"} <= set(config):
        cfg = Config.make(config["family"], config["params"])
    else:
        raise UserError(f"config must be a Config or {{'family': ..., 'params': {{...}}}}, got {config!r}")
    Family.load(cfg.family).validate_params(cfg.as_dict(), cfg.name)
    return cfg


def _shape(shape: Any) -> Problem:
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
    """C = alpha * op(A) @ op(B) + beta * C in float32 (op(X) is X.T when trans_x, else X),
    with the tuned kernel for this GPU, shape and layout (the shape's own record -- with beta != 0
    the one searched with a beta (`search --beta`) if there is one -- else the stored config of
    that layout -- else of any -- predicted fastest at this shape, else a default config).
    Returns `out`, or a new array when it is None (then beta must be 0).

    `precision`, as torch.set_float32_matmul_precision names it: "highest" (the default) is
    strict FP32 on the CUDA cores; "high" may also run kernels searched with `--precision high`
    (tensor-core products of split operands, errors at most 1.5x FP32 cuBLAS's), "medium" those
    of `--precision medium` (one TF32 product, errors at most 1.5x TF32 cuBLAS's). A tier with no
    record of its own runs strict FP32 kernels, which meet every tier's contract.

    A, B and out are float32 arrays on the current device: CuPy arrays, PyTorch CUDA
    tensors, or any array with `__cuda_array_interface__` (Numba, ...) or `__dlpack__`, taken
    without a copy. A new output is of A's kind: a torch tensor for a torch A (allocated by
    torch), a Numba array for a Numba A (Numba waits for the kernel before it hands the array
    over), else a cupy.ndarray. Work is queued on torch's current stream when an operand is a
    torch tensor, else on CuPy's current stream.

    Nothing is copied when each operand has a contiguous axis: row-major arrays and row slices
    of them are read with their row pitch, transposes and Fortran-order arrays as transposed
    operands (A.T @ B is the "tn" layout, read in place, with kernels tuned for it when the
    results hold that layout), and a column-major `out` is written as C^T = op(B)^T op(A)^T.
    An operand with no contiguous axis (a slice with a step, a broadcast view) is copied. `out`
    must not overlap A or B (ValueError). A host array (NumPy, a CPU tensor) is a TypeError.
    Some kernels copy an operand into their own workspace as their first step, where the search
    found that faster than reading it in place (warptile's PACKB: B at a 16-byte row pitch when
    N % 4 != 0, or B stored N x K transposed, as for X @ W.T); the caller's arrays are only read.

    More than two dimensions make a batch, as in cupy.matmul: the last two axes are the matrices,
    the others broadcast (a 2-D B with a 3-D A is one B for every matrix of A, read once, not
    copied); the whole batch is one strided batched launch of a kernel built for batches (the
    nearest tuned batch, else a tuned single product's config made batched when it has such a
    form, else the fallback). An input whose batch axes are not one stride apart is copied; an
    `out` whose are, or whose matrices overlap each other, is a ValueError. trans_a / trans_b
    transpose each matrix (the last two axes).
    """
    if precision not in PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    arrays = gpu_arrays()
    try:
        ops = arrays.prepare(A, B, out, beta, trans_a, trans_b)
        kernel = _choose(ops.device, _problem(ops.M, ops.N, ops.K, ops.layout, ops.batch, beta, precision))
        return kernel._launch(ops, alpha, beta)
    except RuntimeError as exc:  # free when nothing is raised: a call costs no check of the device
        if (missing := _no_gpu(exc)) is None:
            raise
        raise missing from exc


def _no_gpu(exc: RuntimeError) -> NoGPUError | None:
    """A NoGPUError when CUDA has no device to run on, the reason `exc` came (CuPy's error for
    it says only what CUDA said); else None."""
    why = None if isinstance(exc, UserError) else gpu_arrays().no_device()
    if why is None:
        return None
    return NoGPUError(
        f"no CUDA GPU: {why}; autotune.load and autotune.matmul run kernels on one "
        "('autotune search --dry-run' and 'autotune check --static' work without)"
    )
