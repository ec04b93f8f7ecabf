"""Tuned kernels from Python: `autotune.matmul(A, B)` and `autotune.load(...)`.

`matmul` dispatches on the current GPU and the shape: the stored result of the nearest tuned
shape for this GPU (results/<gpu>/), else a sound default config. Each kernel is verified
against cuBLAS on a small awkward problem the first time it is loaded on a device.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from .limits import gpu_slug
from .results import entry_config, gpu_dirs, iter_records
from .space import ROOT, Family, Space
from .types import Config, Problem, UserError

# For a shape with no tuned result: the named fallback config of these families (configs/*.yaml),
# correct everywhere; warptile needs cp.async (sm_80 and newer), older parts get float4 tiles.
_FALLBACK_FAMILY = {"sm_80": "warptile", "older": "vectorized"}
_VERIFY_SHAPE = (67, 45, 33)


def results_dir() -> Path:
    """$AUTOTUNE_RESULTS, else ./results when it exists, else the checkout's results/ when autotune
    runs from a checkout (an installed wheel has no results of its own)."""
    env = os.environ.get("AUTOTUNE_RESULTS")
    if env:
        return Path(env)
    if Path("results").is_dir() or ROOT == Path(__file__).resolve().parent:
        return Path("results")
    return ROOT / "results"


def _distance(a: Problem, b: Problem) -> float:
    return sum(abs(math.log(x / y)) for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K)))


def nearest_entry(
    problem: Problem, slug: str, root: Path | None = None, family: str | None = None
) -> tuple[Problem, dict] | None:
    """(tuned shape, best entry, of `family` if given) nearest to `problem` in log-space, or
    None when none is stored."""
    root = Path(root) if root else results_dir()
    if slug not in gpu_dirs(root):
        return None
    best = None
    for _path, rec in iter_records(root, slug):
        shape = Problem(**rec["problem"])
        fams = rec["families"]
        entry = fams.get(family) if family else (max(fams.values(), key=lambda e: e["gflops"]) if fams else None)
        if entry and (best is None or _distance(problem, shape) < _distance(problem, best[0])):
            best = (shape, entry)
    return best


class Kernel:
    """A compiled, verified SGEMM kernel on the current device: `kernel(A, B, out, alpha, beta)`."""

    def __init__(self, config: Config, arch: str, source: str = "default"):
        from .gpu.compile import compile_source
        from .gpu.runner import LoadedKernel
        from .render import DEFAULT_KERNEL, render

        resolved = Family.load(config.family).resolve(config)
        self.config, self.source, self.family = resolved.config, source, resolved.family
        compiled = compile_source(render(resolved), arch, DEFAULT_KERNEL)
        self.resources = compiled.resources
        self._kernel = LoadedKernel(compiled.cubin, DEFAULT_KERNEL, resolved.plan)

    def __repr__(self) -> str:
        return f"<autotune.Kernel {self.config.name} ({self.source})>"

    def __call__(self, A, B, out=None, alpha: float = 1.0, beta: float = 0.0):
        import cupy as cp

        M, K, N = _check_operands(A, B, out)
        if out is None:
            out = cp.empty((M, N), dtype=cp.float32) if beta == 0 else None
            if out is None:
                raise UserError("beta != 0 needs an `out` array holding C")
        self._kernel.launch(
            M, N, K, _contiguous(A), _contiguous(B), out, alpha, beta, stream=cp.cuda.get_current_stream()
        )
        return out

    def verify(self, tolerance: float = 1e-4) -> float:
        """Relative error on a small awkward problem against cuBLAS in float64; raises if wrong."""
        import cupy as cp

        M, N, K = _VERIFY_SHAPE
        rng = cp.random.default_rng(1)
        a = rng.random((M, K), dtype=cp.float32) * 2 - 1
        b = rng.random((K, N), dtype=cp.float32) * 2 - 1
        c0 = rng.random((M, N), dtype=cp.float32) * 2 - 1
        out = c0.copy()
        self(a, b, out, 1.5, -0.5)
        ref = 1.5 * (a.astype(cp.float64) @ b.astype(cp.float64)) - 0.5 * c0.astype(cp.float64)
        err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
        if not err <= tolerance:
            raise RuntimeError(f"{self.config.name}: relative error {err:.3g} on {M}x{N}x{K}; not using it")
        return err


def _contiguous(x):
    import cupy as cp

    return x if x.flags.c_contiguous else cp.ascontiguousarray(x)


def _check_operands(A, B, out) -> tuple[int, int, int]:
    import cupy as cp

    for name, x in (("A", A), ("B", B)) + ((("out", out),) if out is not None else ()):
        if not isinstance(x, cp.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {type(x).__name__}")
        if x.dtype != cp.float32:
            raise TypeError(f"{name} must be float32 (strict FP32 SGEMM), got {x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {x.shape}")
        if x.device.id != cp.cuda.Device().id:
            raise ValueError(f"{name} is on device {x.device.id}, the current device is {cp.cuda.Device().id}")
    (M, K), (K2, N) = A.shape, B.shape
    if K != K2:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not chain (A is MxK, B is KxN)")
    if min(M, N, K) < 1:
        raise ValueError(f"empty operand: M={M}, N={N}, K={K}")
    if out is not None:
        if out.shape != (M, N):
            raise ValueError(f"out must have shape {(M, N)}, got {out.shape}")
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
    return M, K, N


_CACHE: dict[tuple[int, str], Kernel] = {}


def _device() -> tuple[int, str, str]:
    import cupy as cp

    from .gpu.runner import device_info

    dev = cp.cuda.Device().id
    info = device_info(dev)
    return dev, gpu_slug(info["name"]), info["arch"]


def fallback_config(arch: str, family: str | None = None) -> Config:
    """The named fallback config of `family`, or of the default family for `arch` (e.g. sm_90)."""
    fam = family or _FALLBACK_FAMILY["sm_80" if int(arch.split("_")[1].rstrip("a")) >= 80 else "older"]
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
        shape: MxNxK (a Problem, a 'MxNxK' string or an (M, N, K) tuple): the stored best config
            of the nearest tuned shape for this GPU (family: only that family's).
        config: a Config (or {"family": ..., "params": {...}}) to load instead.
        results: the results folder (default: see results_dir()).
    Returns:
        Kernel, callable as kernel(A, B, out=None, alpha=1.0, beta=0.0).
    """
    cfg = _explicit_config(config) if config is not None else None  # checked before the GPU is asked
    problem = _shape(shape) if config is None and shape is not None else None
    from .gpu.compile import nvrtc_version

    nvrtc_version()  # without the CUDA extra: one error naming it, before CuPy is asked for a device
    dev, slug, arch = _device()
    source = "explicit config"
    if cfg is None:
        if problem is not None:
            found = nearest_entry(problem, slug, Path(results) if results else None, family)
            if found:
                tuned, entry = found
                cfg, source = entry_config(entry), f"tuned for {tuned.name} on {slug}"
        if cfg is None:
            cfg, source = fallback_config(arch, family), "fallback config"
    key = (dev, cfg.name)
    if key not in _CACHE:
        kernel = Kernel(cfg, arch, source)
        kernel.verify()
        _CACHE[key] = kernel
    return _CACHE[key]


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


def matmul(A, B, out=None, alpha: float = 1.0, beta: float = 0.0):
    """C = alpha * A @ B + beta * C for float32 CuPy arrays, with the tuned kernel for this GPU
    and shape (nearest tuned shape, else a default config). Returns `out` (allocated if None)."""
    M, K, N = _check_operands(A, B, out)
    return load((M, N, K))(A, B, out, alpha, beta)
