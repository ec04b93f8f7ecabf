"""Tuned kernels from Python: `autotune.matmul(A, B)` and `autotune.load(...)`.

`matmul` dispatches on the current GPU and the shape: the stored result of that shape when it
was tuned for this GPU (results/<gpu>/), else the stored config that autotune.dispatch.model predicts
fastest there (every family's best at every tuned shape, its measured time carried over by
occupancy, wave quantisation and the roofline), else a sound default config. Each kernel is
verified against cuBLAS on a small awkward problem the first time it is loaded on a device.

A call costs about what calling the loaded kernel does: the device's name and arch are read once
per device, a GPU's results folder once per change of that folder (one stat a call tells), and
the kernel chosen for each (device, shape, layout, batch, family, folder) is remembered.

The results folder is read as the command line reads it (autotune.records.results): a record that is
damaged, contradicts itself, or holds a config its (shipped) family refuses makes the call raise
one UserError naming the file, as `autotune list` or `export` would say it; a folder with a bad
record is not used in part. A record's entry of a family not shipped here is no candidate.
"""

from __future__ import annotations

import copy
import functools
import os
import time
import warnings
from pathlib import Path
from typing import Any

from ..core.types import PRECISIONS, Config, NoGPUError, Problem, UserError
from ..kernels.limits import DeviceLimits, gpu_slug, profile_for_arch
from ..kernels.space import ROOT, Family, Space
from ..records.results import entry_config, fastest, iter_records
from . import model

# For a shape with no tuned result: the named fallback config of these families (configs/*.yaml),
# correct everywhere; warptile needs cp.async (sm_80 and newer), older parts get float4 tiles.
_FALLBACK_FAMILY = {"sm_80": "warptile", "older": "vectorized"}
_VERIFY_SHAPE = (67, 45, 33)


_INSTALLED = ROOT == Path(__file__).resolve().parent.parent  # a wheel: templates inside the package
_CHECKOUT_RESULTS = str(ROOT / "results")


def results_dir() -> Path:
    """$AUTOTUNE_RESULTS, else ./results when it exists, else the checkout's results/ when autotune
    runs from a checkout (an installed wheel has no results of its own)."""
    env = os.environ.get("AUTOTUNE_RESULTS")
    if env:
        return Path(env)
    return Path("results" if _INSTALLED or os.path.isdir("results") else _CHECKOUT_RESULTS)


@functools.cache
def _family(name: str) -> Family:
    """A family's declaration, parsed once a process: choosing a kernel for a new shape asks
    every stored record's families whether they read its layout."""
    return Family.load(name)


def _reads(family: str, problem: Problem) -> bool:
    """Whether `family` (known here) can be built for the problem's layout and batch."""
    try:
        return not _family(family).gaps(problem)
    except UserError:
        return False  # a family no longer shipped: its records cannot be used


def built_for(
    config: Config, layout: str = "nn", batch: int = 1, precision: str = "highest", limits: DeviceLimits | None = None
) -> Config | None:
    """`config` built for `layout`, batch > 1 for a batch, and `precision`: its TRANS_A / TRANS_B /
    BATCHED (and PRECISION, where it has one) set to theirs; None when that breaks one of its
    family's rules (a split-K config has no batched form) or, given a device's `limits`, one of the
    device's (a medium-tier wgmma config built for high holds twice the tiles in shared memory,
    past what a block may have: it would not launch)."""
    return _built_for(config, layout, batch > 1, precision, limits)


@functools.lru_cache(maxsize=8192)
def _built_for(config: Config, layout: str, batched: bool, precision: str, limits: DeviceLimits | None):
    # Remembered: choosing a kernel for a new shape builds every stored config for its layout,
    # which costs more than the rest of the choice.
    fam = _family(config.family)
    cfg = fam.built_for(config, Problem(1, 1, 1, layout, 2 if batched else 1, precision=precision))
    if fam.broken_rules(cfg) or (limits is not None and fam.violations(cfg, limits)):
        return None
    return cfg


def nearest_entry(
    problem: Problem, slug: str, root: Path | None = None, family: str | None = None
) -> tuple[Problem, dict] | None:
    """(tuned shape, best entry, of `family` if given) nearest to `problem` in log-space, or
    None when none is stored."""
    return _table_for(root, slug).nearest(problem, family)


# A table is trusted while its folder's state (device, inode, mtime) is unchanged, but only once
# the folder's mtime is older than this when the table is read: a record renamed into the folder
# within the same timestamp tick (coarse on most filesystems, 2 s on FAT) as the change already
# seen would leave the mtime as it was. Until then the table is read again at each call.
_RACY_NS = 2_000_000_000
_CHOICES_MAX = 4096  # shapes remembered per table; the oldest goes first


class _Table:
    """One GPU's records in one results folder, as read at one state of that folder, and the
    kernel chosen for each (device, M, N, K, layout, batch, family) asked since."""

    def __init__(self, folder: str, state: tuple | None, records: list[tuple[Problem, dict]], clean: bool):
        self.folder, self.state, self.records, self.clean = folder, state, records, clean
        self.choices: dict[tuple, Kernel] = {}
        self.plans: dict[str, object] = {}  # config name -> its launch plan (the model's)

    def _pool(self, problem: Problem) -> list[tuple[Problem, dict]]:
        """The records a choice draws on: of the problem's layout and batching (batch or not) when
        there are any, else of its layout, else all (configs tuned for another layout or
        batching, to be built for this one)."""
        batched = problem.batch > 1
        same = [(shape, fams) for shape, fams in self.records if shape.layout == problem.layout]
        alike = [(shape, fams) for shape, fams in same if (shape.batch > 1) == batched]
        return alike or same or self.records

    def nearest(self, problem: Problem, family: str | None) -> tuple[Problem, dict] | None:
        """The nearest tuned shape's best entry (of `family`, if given) among the families that
        can run the problem, from `_pool`."""
        best = None
        for shape, fams in self._pool(problem):
            pick = fastest(fams, lambda f: family in (None, f) and _reads(f, problem))
            entry = fams[pick] if pick is not None else None
            if entry and (best is None or model.distance(problem, shape) < model.distance(problem, best[0])):
                best = (shape, entry)
        return best

    def choose(
        self, problem: Problem, family: str | None, limits: DeviceLimits | None = None
    ) -> tuple[Problem, dict, Config, float | None] | None:
        """(tuned shape, its entry, the config to run, predicted ms or None when measured here):
        the best entry of the problem's own record when it was tuned; else the candidate of
        `_pool` -- every family's best at every tuned shape, that can run the problem and is
        meant for it (or is the family asked for) -- that autotune.dispatch.model predicts fastest here.
        Below the highest precision the shape's FP32 record is the tier's own too (its kernels
        meet every contract): the faster of the two records' best entries serves."""
        # The shape's own records: those timed with beta 0 or not, as this call, first.
        tiers = {problem.precision, "highest"}
        same = problem.with_beta(0.0)
        exact = [
            ((shape.beta == 0) != (problem.beta == 0), shape, fams)
            for shape, fams in self.records
            if shape.precision in tiers and shape.with_beta(0.0).with_precision(problem.precision) == same
        ]
        for other_beta in (False, True):
            picks = []
            for _, shape, fams in (r for r in exact if r[0] == other_beta):
                pick = fastest(fams, lambda f: family in (None, f) and _reads(f, problem))
                if pick is not None:
                    entry = fams[pick]
                    cfg = built_for(entry_config(entry), problem.layout, problem.batch, problem.precision, limits)
                    if cfg is not None:
                        picks.append((entry["gflops"], shape, entry, cfg))
            if picks:
                _, shape, entry, cfg = max(picks, key=lambda p: p[0])
                return shape, entry, cfg, None
        candidates = [
            c for shape, fams in self._pool(problem) for c in self._candidates(shape, fams, problem, family, limits)
        ]
        best = model.fastest(candidates, problem, self.roof)
        if best is None:
            return None
        shape, entry, cfg = best[0].what
        return shape, entry, cfg, best[1]

    def _candidates(self, shape: Problem, fams: dict, problem: Problem, family: str | None, limits=None):
        for f, entry in fams.items():
            if family not in (None, f) or not _reads(f, problem) or (family is None and _family(f).unsuited(problem)):
                continue
            try:
                cfg = built_for(entry_config(entry), problem.layout, problem.batch, problem.precision, limits)
                if cfg is None:
                    continue
                measured = self._plan(entry_config(entry))
                slots = model.slots(measured, entry["registers"], entry["smem_bytes"], entry["limits"])
                plan = self._plan(cfg)
                sms = entry["limits"]["sm_count"]
                yield model.Candidate(shape, measured, plan, entry["time_ms"], slots, sms, (shape, entry, cfg))
            except (UserError, KeyError, TypeError, ValueError):
                continue  # an entry from an older format, or a family no longer shipped

    def _plan(self, cfg: Config):
        plan = self.plans.get(cfg.name)
        if plan is None:
            plan = self.plans[cfg.name] = _family(cfg.family).resolve(cfg).plan
        return plan

    @functools.cached_property
    def roof(self) -> model.Roof:
        return model.Roof.of(
            (shape, e["time_ms"]) for shape, fams in self.records for e in fams.values() if e.get("time_ms")
        )

    def remember(self, key: tuple, kernel: Kernel) -> Kernel:
        if len(self.choices) >= _CHOICES_MAX:
            del self.choices[next(iter(self.choices))]
        self.choices[key] = kernel
        return kernel


_TABLES: dict[tuple[str, str], _Table] = {}  # (results folder, GPU slug) -> its table


def _table_for(results: str | Path | None, slug: str) -> _Table:
    """The table of `slug` in `results`, by default in results_dir(), found with one stat in the
    usual cases (a folder named, $AUTOTUNE_RESULTS, a wheel, or ./results holding this GPU)."""
    if results:
        return _table(os.fspath(results), slug)
    env = os.environ.get("AUTOTUNE_RESULTS")
    if env:
        return _table(env, slug)
    table = _table("results", slug)
    if _INSTALLED or table.state is not None or os.path.isdir("results"):
        return table
    return _table(_CHECKOUT_RESULTS, slug)


def _table(root: str, slug: str) -> _Table:
    """The records of `slug` under `root`, read again only when that folder changed (one stat)."""
    table = _TABLES.get((root, slug))
    if table is None or not table.clean or table.state != _folder_state(table.folder):
        table = _TABLES[(root, slug)] = _read_table(root, slug)
    return table


def _folder_state(folder: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None  # no such folder: no records (until it appears, which changes the state)
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


def _read_table(root: str, slug: str) -> _Table:
    folder = os.path.join(root, slug)
    now = time.time_ns()  # before the stat: a change after it gets a later mtime once clean
    state = _folder_state(folder)
    records = []
    if state is not None:
        for path, rec in iter_records(root, slug):
            _check_configs(path, rec)
            records.append((Problem(**rec["problem"]), rec["families"]))
    return _Table(folder, state, records, state is None or now - state[2] > _RACY_NS)


def _check_configs(path: Path, record: dict) -> None:
    """Each entry's config as its family takes it (parameters declared, values in their domains),
    else one UserError naming the record; entries of families not shipped here are left to
    `_reads`, which makes them no candidate."""
    for entry in record["families"].values():
        cfg = entry_config(entry)
        try:
            fam = _family(cfg.family)
        except UserError:
            continue
        try:
            fam.resolve(cfg, f"stored config {cfg.name}")
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None


class Kernel:
    """A compiled, verified SGEMM kernel on the current device: `kernel(A, B, out, alpha, beta)`."""

    def __init__(self, config: Config, arch: str, source: str = "default"):
        from ..gpu.compile import compile_source
        from ..gpu.runner import LoadedKernel
        from ..kernels.render import DEFAULT_KERNEL, render

        resolved = _family(config.family).resolve(config)
        self.config, self.source, self.family = resolved.config, source, resolved.family
        self.layout = Problem.layout_of(resolved.plan.layout)
        self.precision = resolved.env.get("PRECISION", "highest")  # the tier it was built for
        self.batched = resolved.plan.batched  # a batch in one launch (else one launch a matrix)
        compiled = compile_source(render(resolved), self.family.compile_arch(arch), DEFAULT_KERNEL)
        self.resources = compiled.resources
        self._kernel = LoadedKernel(compiled.cubin, DEFAULT_KERNEL, resolved.plan)

    def __repr__(self) -> str:
        return f"<autotune.Kernel {self.config.name} ({self.source})>"

    def __call__(
        self, A, B, out=None, alpha: float = 1.0, beta: float = 0.0, *, trans_a: bool = False, trans_b: bool = False
    ):
        """C = alpha * op(A) @ op(B) + beta * C; the same arrays and arguments as
        `autotune.matmul` (see there). The kernel reads one layout (`layout`): an operand stored
        the other way is copied first. A batch runs in one launch on a kernel built for batches
        (`batched`), one launch per matrix on another."""
        ops = _gpu_arrays().prepare(A, B, out, beta, trans_a, trans_b)
        return self._launch(ops.as_layout(self.layout), alpha, beta)

    def _launch(self, ops, alpha: float, beta: float):
        self._kernel.launch(
            ops.M, ops.N, ops.K, ops.a, ops.b, ops.c, alpha, beta, ops.stream, ops.pitches, ops.batch, ops.strides
        )
        return ops.finish()

    def verify(self, tolerance: float | None = None) -> float:
        """Relative error on a small awkward problem against cuBLAS in float64; raises if wrong
        (above `tolerance`, by default 1e-4, or 2e-3 for a one-TF32-product kernel)."""
        if tolerance is None:
            tolerance = 2e-3 if self.precision == "medium" else 1e-4
        import cupy as cp

        M, N, K = _VERIFY_SHAPE
        a, b, c0, ref = _verify_problem(cp.cuda.Device().id)
        out = c0.copy()
        self(a, b, out, 1.5, -0.5)
        err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
        if not err <= tolerance:
            raise RuntimeError(f"{self.config.name}: relative error {err:.3g} on {M}x{N}x{K}; not using it")
        return err


@functools.cache
def _verify_problem(dev: int):
    """(A, B, C0, 1.5 A B - 0.5 C0 in float64) of the load-time check, made once per device: a
    kernel's first load costs its check, not a new random generator and reference."""
    import cupy as cp

    M, N, K = _VERIFY_SHAPE
    rng = cp.random.default_rng(1)
    a = rng.random((M, K), dtype=cp.float32) * 2 - 1
    b = rng.random((K, N), dtype=cp.float32) * 2 - 1
    c0 = rng.random((M, N), dtype=cp.float32) * 2 - 1
    ref = 1.5 * (a.astype(cp.float64) @ b.astype(cp.float64)) - 0.5 * c0.astype(cp.float64)
    cp.cuda.get_current_stream().synchronize()  # read from any stream after this
    return a, b, c0, ref


_ARRAYS = None  # autotune.gpu.arrays, once imported


def _gpu_arrays():
    global _ARRAYS
    if _ARRAYS is None:
        from ..gpu.compile import nvrtc_version

        nvrtc_version()  # without the CUDA extra: one error naming it, before CuPy is imported
        from ..gpu import arrays

        _ARRAYS = arrays
    return _ARRAYS


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


def _choose(
    dev: int,
    M: int,
    N: int,
    K: int,
    layout: str,
    batch: int,
    family: str | None,
    results,
    beta: float = 0.0,
    precision: str = "highest",
) -> Kernel:
    """The kernel for this device, shape, layout, batch, beta (0 or not) and precision tier: a
    dict lookup once they were seen, as long as this GPU's results folder is unchanged."""
    slug, arch = _device_props(dev)
    table = _table_for(results, slug)
    key = (dev, M, N, K, layout, batch, beta != 0, family, precision)
    kernel = table.choices.get(key)
    if kernel is None:
        problem = Problem(M, N, K, layout, batch, beta, precision)
        if family is not None and (gaps := _family(family).gaps(problem)):
            raise UserError(gaps[0])
        found = table.choose(problem, family, _device_limits(dev, arch))

        def fallback() -> Kernel:
            cfg = built_for(fallback_config(arch, family), layout, batch, precision)
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
    # Read once a process, as the families' declarations are (_family): a space's file takes
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
    arrays = _gpu_arrays()
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
    p = problem
    return _choose(dev, p.M, p.N, p.K, p.layout, p.batch, family, results, p.beta, p.precision)


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
    arrays = _gpu_arrays()
    try:
        ops = arrays.prepare(A, B, out, beta, trans_a, trans_b)
        kernel = _choose(ops.device, ops.M, ops.N, ops.K, ops.layout, ops.batch, None, None, beta, precision)
        return kernel._launch(ops, alpha, beta)
    except RuntimeError as exc:  # free when nothing is raised: a call costs no check of the device
        if (missing := _no_gpu(exc)) is None:
            raise
        raise missing from exc


def _no_gpu(exc: RuntimeError) -> NoGPUError | None:
    """A NoGPUError when CUDA has no device to run on, the reason `exc` came (CuPy's error for
    it says only what CUDA said); else None."""
    why = None if isinstance(exc, UserError) else _gpu_arrays().no_device()
    if why is None:
        return None
    return NoGPUError(
        f"no CUDA GPU: {why}; autotune.load and autotune.matmul run kernels on one "
        "('autotune search --dry-run' and 'autotune check --static' work without)"
    )
