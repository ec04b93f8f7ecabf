"""NVRTC compile to a cubin, with the ptxas resource report; needs NVRTC, not a GPU.

NVRTC comes with CuPy's CUDA wheels (`cupy_backends.cuda.libs.nvrtc`); compiling for a given
`--arch` works on a machine without a GPU, so CI checks registers and spills of every
candidate. Results are cached on disk by a hash of source, options and NVRTC version.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path

from ..core.cachedir import cache_folder, entry_lock, read_bytes, write_atomic
from ..core.types import UserError

OPTIONS = ("--std=c++17", "-default-device", "-Xptxas=-v")

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_ERROR_LINE = re.compile(r"\berror\s*:")  # "x.cu(12): error: ...", "ptxas error   : ..."
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


class CompileError(Exception):
    """NVRTC rejected the source.

    The message holds the first lines of its log (errors first), `log` the whole of it.
    """

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@dataclass
class Resources:
    registers: int
    spill_bytes: int  # spill stores + spill loads
    stack_bytes: int
    smem_static_bytes: int


@dataclass
class Compiled:
    cubin: bytes
    kernel: str
    arch: str
    resources: Resources
    log: str
    compile_s: float
    cached: bool = False


INSTALL_HINT = 'pip install "autotune[cuda13]" (or [cuda12] for a CUDA 12 driver)'


class NVRTCMissing(UserError):
    """CuPy or NVRTC is not installed: nothing can be compiled, so the command stops at once."""


_LOAD_LOCK = threading.Lock()
_loaded = None  # CuPy's NVRTC binding, once NVRTC and its builtins are in the process
_held: list = []  # libraries loaded here, kept for the life of the process


# CuPy loads libnvrtc at its first call, unlocked, through cuda-pathfinder, which (1.9) maps
# libnvrtc and only then preloads the builtins. A thread that comes between the two finds libnvrtc
# "already loaded", skips the preload, and its compile fails with `failed to open
# libnvrtc-builtins.so.13.0` (see _hold_builtins). So the first load happens here, under a lock,
# and compile_many makes it before its threads start.
def _nvrtc():
    """Return CuPy's NVRTC binding with libnvrtc and its builtins loaded, once per process."""
    global _loaded
    if _loaded is None:
        with _LOAD_LOCK:
            if _loaded is None:
                _loaded = _load_nvrtc()
    return _loaded


def _load_nvrtc():
    # NVRTC (12.9+) keeps its own cache of assembled PTX, under the CUDA JIT cache switch; a
    # hit skips ptxas and so its -v report, which the static filter needs (then comes a
    # second, full compile with a nonce kernel, below). autotune caches cubin + report itself, so
    # NVRTC's cache only doubles the work here. A user's own setting is left as it is. Set
    # before any compile: setenv while another thread's NVRTC reads the environment is a race.
    os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ("cupy_backends", "cupy"):
            raise NVRTCMissing(f"NVRTC is not installed: {INSTALL_HINT}") from None
        raise NVRTCMissing(f"NVRTC cannot be loaded ({_one_line(exc)}): {INSTALL_HINT}") from None
    except ImportError as exc:
        raise NVRTCMissing(f"NVRTC cannot be loaded ({_one_line(exc)}): {INSTALL_HINT}") from None
    try:
        nvrtc.getVersion()  # CuPy loads libnvrtc at its first call
    except Exception as exc:  # noqa: BLE001 - CuPy passes on whatever its loader raised
        raise NVRTCMissing(f"NVRTC is not installed ({_one_line(exc)}): {INSTALL_HINT}") from None
    _hold_builtins(nvrtc)
    _libnvrtc()
    return nvrtc


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _mapped(prefix: str) -> list[str]:
    """Return the paths of files mapped into this process whose name starts with `prefix`."""
    paths = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    paths.add(parts[5].rstrip("\n"))
    except OSError:
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(prefix))


# At its first compile NVRTC dlopens `libnvrtc-builtins.so.<major>.<minor>` by bare name. The
# libnvrtc.so.13 of the nvidia-cuda-nvrtc 13.0 wheel has no RUNPATH, so the loader looks in
# LD_LIBRARY_PATH, the ld.so cache and /lib, /usr/lib, never beside libnvrtc: the compile works only
# if the builtins are in the process already (cuda-pathfinder's preload) or a CUDA toolkit is on the
# system path. pathfinder skips the preload when libnvrtc is mapped before its own load: by another
# thread (see _nvrtc) or by another package (numba, cuda-python...); then every compile fails.
# Loading the sibling here completes the first load whoever mapped libnvrtc. A compile that still
# cannot open its builtins fails with NVRTC's message: a retry would only hide an install that
# cannot work.
def _hold_builtins(nvrtc) -> None:
    """Load libnvrtc-builtins beside the libnvrtc CuPy uses, unless it is in the process already."""
    if not sys.platform.startswith("linux"):
        return
    major, minor = nvrtc.getVersion()
    name = f"libnvrtc-builtins.so.{major}.{minor}"
    if _mapped(name):
        return
    for lib in _mapped("libnvrtc.so"):
        sibling = os.path.join(os.path.dirname(os.path.realpath(lib)), name)
        if os.path.isfile(sibling):
            try:
                _held.append(ctypes.CDLL(sibling))
            except OSError:
                continue
            return


def nvrtc_version() -> str:
    major, minor = _nvrtc().getVersion()
    return f"{major}.{minor}"


def parse_resources(log: str, kernel: str) -> Resources:
    """Return registers, spills, stack and static shared memory of `kernel` from a ptxas -v log."""
    current, found = None, {}
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
        elif m := _PROPS.search(line):
            current = m.group(1)
        elif (m := _SPILL.search(line)) and current:
            found.setdefault(current, {}).update(stack=int(m.group(1)), spill=int(m.group(2)) + int(m.group(3)))
        elif (m := _USED.search(line)) and current:
            found.setdefault(current, {}).update(regs=int(m.group(1)), smem=int(m.group(2) or 0))
    info = found.get(kernel)
    if not info or "regs" not in info:
        raise CompileError(f"no ptxas resource report for kernel {kernel!r} in the NVRTC log")
    # A split launch's tail kernel runs beside it: the most registers and every spill count.
    tail = found.get(kernel + "_tail", {})
    return Resources(
        max(info["regs"], tail.get("regs", 0)),
        info.get("spill", 0) + tail.get("spill", 0),
        max(info.get("stack", 0), tail.get("stack", 0)),
        info["smem"],
    )


def cache_dir() -> Path | None:
    """Return NVRTC's cache folder (cachedir.py), or None when there is none."""
    return cache_folder("nvrtc")


def _options(arch: str, options: Sequence[str]) -> list[str]:
    return [f"--gpu-architecture={arch}", *OPTIONS, *options]


def cache_key(source: str, arch: str, kernel: str, options: Sequence[str] = ()) -> str:
    """Return the name of a compile's entry in the cache (`<key>.json` and `<key>.cubin`).

    It is a hash of NVRTC's version, the kernel, the options and the source.
    """
    opts = _options(arch, options)
    return hashlib.sha256("\0".join([nvrtc_version(), kernel, *opts, source]).encode()).hexdigest()[:32]


def compile_source(
    source: str, arch: str, kernel: str, options: Sequence[str] = (), use_cache: bool = True
) -> Compiled:
    """Compile CUDA `source` for `arch` (e.g. 'sm_90'); raise CompileError with the log."""
    nvrtc = _nvrtc()
    opts = _options(arch, options)
    key = cache_key(source, arch, kernel, options)
    cdir = cache_dir() if use_cache else None
    if cdir is None:
        return _build(nvrtc, source, arch, kernel, opts)
    found = _from_cache(cdir, key, kernel, arch)
    if found is not None:
        return found
    with entry_lock(cdir / f"{key}.lock"):
        found = _from_cache(cdir, key, kernel, arch)  # built by the process that held the lock
        if found is not None:
            return found
        out = _build(nvrtc, source, arch, kernel, opts)
        _store(cdir, key, out)
        return out


def _from_cache(cdir: Path, key: str, kernel: str, arch: str) -> Compiled | None:
    """Return the cache's entry for `key`, or None for a miss (a damaged entry is one)."""
    hit = _cached(read_bytes(cdir / f"{key}.json"), read_bytes(cdir / f"{key}.cubin"))
    return None if hit is None else Compiled(hit[0], kernel, arch, hit[1], hit[2], 0.0, True)


def _build(nvrtc, source: str, arch: str, kernel: str, opts: list[str]) -> Compiled:
    t0 = time.perf_counter()
    cubin, log = _nvrtc_compile(nvrtc, source, kernel, opts)
    try:
        res = parse_resources(log, kernel)
    except CompileError:
        # On the GPU machines NVRTC serves a module whose PTX it has assembled before (in any
        # process) from a cache, with an empty log: no ptxas report (a comment is not enough:
        # the cache key is the PTX). An empty extra kernel makes the PTX new and
        # leaves the SGEMM kernel's code, registers and shared memory as they are.
        nonce = f'\nextern "C" __global__ void autotune_nonce_{time.time_ns()}_{os.getpid()}() {{}}\n'
        cubin, log = _nvrtc_compile(nvrtc, source + nonce, kernel, opts)
        res = parse_resources(log, kernel)
    return Compiled(cubin, kernel, arch, res, log, time.perf_counter() - t0)


def _nvrtc_compile(nvrtc, source: str, kernel: str, opts: list[str]) -> tuple[bytes, str]:
    prog = nvrtc.createProgram(source, f"{kernel}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(f"{exc}: {_first_error(log)}", log) from None
        return _get_cubin(nvrtc, prog), nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


@cache
def _libnvrtc():
    # The libnvrtc CuPy loaded, never a second copy from another search: a program handle means
    # something only to the library that made it. With two in the process, which is CuPy's is
    # unknown, so neither is used.
    paths = _mapped("libnvrtc.so")
    try:
        return ctypes.CDLL(paths[0]) if len(paths) == 1 else None
    except OSError:
        return None


# CuPy's getCUBIN treats the buffer as a C string and drops its last byte; the driver tolerates
# that, but cuobjdump and nvdisasm reject the file.
def _get_cubin(nvrtc, prog) -> bytes:
    """Return the whole cubin (CuPy's getCUBIN drops the last byte, which cuobjdump needs)."""
    cubin = nvrtc.getCUBIN(prog)
    lib = _libnvrtc()
    if lib is not None:
        size = ctypes.c_size_t()
        if lib.nvrtcGetCUBINSize(ctypes.c_void_p(prog), ctypes.byref(size)) == 0 and size.value == len(cubin) + 1:
            buf = ctypes.create_string_buffer(size.value)
            # Only if it is the same image (a check that costs one copy of the cubin).
            if lib.nvrtcGetCUBIN(ctypes.c_void_p(prog), buf) == 0 and buf.raw[:-1] == cubin:
                return buf.raw
    return cubin + b"\0"  # the dropped byte is the NUL padding that ends the ELF image


def _first_error(log: str, lines: int = 3) -> str:
    """Return an NVRTC log's first lines, errors first, joined by ' | ' for a one-line reason."""
    text = [ln.strip() for ln in log.splitlines() if ln.strip().strip("^") and not ln.startswith("Remark")]
    errors = [ln for ln in text if _ERROR_LINE.search(ln)]
    picked = (errors + [ln for ln in text if ln not in errors])[:lines]
    return " | ".join(picked) if picked else "no log"


# A damaged entry (not JSON, a field missing, extra or of another type, a cubin that is not an ELF
# image) is a miss, which the compile that follows writes again: anyone who can write the cache
# folder can damage it, and a damaged entry must cost a compile, not a traceback or a wrong count.
def _cached(raw: bytes | None, cubin: bytes | None) -> tuple[bytes, Resources, str] | None:
    """Return a cache entry's cubin, resources and log, or None for a miss (none, or damaged)."""
    if raw is None or cubin is None or not cubin.startswith(b"\x7fELF"):
        return None
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(meta, dict) or set(meta) != {"resources", "log"} or not isinstance(meta["log"], str):
        return None
    res = meta["resources"]
    names = [f.name for f in fields(Resources)]
    if not isinstance(res, dict) or sorted(res) != sorted(names):
        return None
    if not all(type(res[n]) is int and 0 <= res[n] < 1 << 31 for n in names):
        return None
    return cubin, Resources(**res), meta["log"]


def _store(cdir: Path, key: str, c: Compiled) -> None:
    # The cubin first: a reader takes an entry only when it finds both files.
    if write_atomic(cdir / f"{key}.cubin", c.cubin):
        write_atomic(cdir / f"{key}.json", json.dumps({"resources": asdict(c.resources), "log": c.log}).encode())


def compile_many(
    jobs: Iterable[tuple[str, str] | tuple[str, str, str]],
    arch: str,
    workers: int | None = None,
    use_cache: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[Compiled | CompileError]:
    """Compile (source, kernel) pairs in parallel threads (NVRTC releases the GIL).

    Args:
        jobs: (source, kernel) pairs; a third element, where given, is the job's own target (a
            family built for sm_90a), else `arch`.
        arch: The target, e.g. 'sm_90'.
        workers: Threads (default: one per job, at most one per core).
        use_cache: Read and write the on-disk cache.
        progress: Called as `progress(done, total)` as each job ends (from the compiling threads).

    Returns:
        A Compiled or a CompileError per job, in order.
    """
    jobs = list(jobs)
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    _nvrtc()  # loaded once, with its builtins, before the threads start (NVRTCMissing if absent)
    ended, lock = [0], threading.Lock()

    def one(job):
        try:
            return compile_source(job[0], job[2] if len(job) > 2 else arch, job[1], use_cache=use_cache)
        except CompileError as exc:
            return exc
        finally:
            if progress is not None:
                with lock:
                    ended[0] += 1
                    progress(ended[0], len(jobs))

    if workers == 1 or len(jobs) <= 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, jobs))
