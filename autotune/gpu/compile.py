"""NVRTC compile to a cubin, with the ptxas resource report. Needs NVRTC, not a GPU.

NVRTC comes with CuPy's CUDA wheels (`cupy_backends.cuda.libs.nvrtc`); compiling for a given
`--arch` works on a machine without a GPU, so CI checks registers and spills of every
candidate. Results are cached on disk by a hash of source, options and NVRTC version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

OPTIONS = ("--std=c++17", "-default-device", "-Xptxas=-v")

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


class CompileError(Exception):
    """NVRTC rejected the source; the message holds its log."""


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


@lru_cache(maxsize=None)
def _nvrtc():
    # NVRTC (12.9+) keeps its own cache of assembled PTX, under the CUDA JIT cache switch; a
    # hit skips ptxas and so its -v report, which the static filter needs (runs 12-13: then a
    # second, full compile with a nonce kernel). autotune caches cubin + report itself, so
    # NVRTC's cache only doubles the work here. A user's own setting is left as it is.
    os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CompileError(f"NVRTC is not available (install the cupy extra for your CUDA): {exc}") from None
    return nvrtc


def nvrtc_version() -> str:
    major, minor = _nvrtc().getVersion()
    return f"{major}.{minor}"


def parse_resources(log: str, kernel: str) -> Resources:
    """Registers, spills, stack and static shared memory of `kernel` from a ptxas -v log."""
    current, found = None, {}
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
        elif m := _PROPS.search(line):
            current = m.group(1)
        elif (m := _SPILL.search(line)) and current:
            found.setdefault(current, {}).update(
                stack=int(m.group(1)), spill=int(m.group(2)) + int(m.group(3)))
        elif (m := _USED.search(line)) and current:
            found.setdefault(current, {}).update(regs=int(m.group(1)), smem=int(m.group(2) or 0))
    info = found.get(kernel)
    if not info or "regs" not in info:
        raise CompileError(f"no ptxas resource report for kernel {kernel!r} in the NVRTC log")
    # A split launch's tail kernel runs beside it: the most registers and every spill count.
    tail = found.get(kernel + "_tail", {})
    return Resources(max(info["regs"], tail.get("regs", 0)), info.get("spill", 0) + tail.get("spill", 0),
                     max(info.get("stack", 0), tail.get("stack", 0)), info["smem"])


def cache_dir() -> Path:
    root = os.environ.get("AUTOTUNE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autotune"
    return Path(root) / "nvrtc"


def compile_source(source: str, arch: str, kernel: str, options: Sequence[str] = (),
                   use_cache: bool = True) -> Compiled:
    """Compile CUDA `source` for `arch` (e.g. 'sm_90'); raise CompileError with the log."""
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}", *OPTIONS, *options]
    key = hashlib.sha256("\0".join([nvrtc_version(), kernel, *opts, source]).encode()).hexdigest()[:32]
    cdir = cache_dir()
    if use_cache:
        try:
            meta = json.loads((cdir / f"{key}.json").read_text())
            cubin = (cdir / f"{key}.cubin").read_bytes()
            return Compiled(cubin, kernel, arch, Resources(**meta["resources"]), meta["log"], 0.0, True)
        except (OSError, ValueError, KeyError, TypeError):
            pass
    t0 = time.perf_counter()
    cubin, log = _nvrtc_compile(nvrtc, source, kernel, opts)
    try:
        res = parse_resources(log, kernel)
    except CompileError:
        # On the GPU machines NVRTC serves a module whose PTX it has assembled before (in any
        # process) from a cache, with an empty log: no ptxas report (runs 12 and 13; a comment
        # is not enough, the cache key is the PTX). An empty extra kernel makes the PTX new and
        # leaves the SGEMM kernel's code, registers and shared memory as they are.
        nonce = f'\nextern "C" __global__ void autotune_nonce_{time.time_ns()}_{os.getpid()}() {{}}\n'
        cubin, log = _nvrtc_compile(nvrtc, source + nonce, kernel, opts)
        res = parse_resources(log, kernel)
    elapsed = time.perf_counter() - t0
    out = Compiled(cubin, kernel, arch, res, log, elapsed)
    if use_cache:
        _store(cdir, key, out)
    return out


def _nvrtc_compile(nvrtc, source: str, kernel: str, opts: list[str]) -> tuple[bytes, str]:
    prog = nvrtc.createProgram(source, f"{kernel}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as exc:
            raise CompileError(f"{exc}: {_first_error(nvrtc.getProgramLog(prog))}") from None
        return _get_cubin(nvrtc, prog), nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


@lru_cache(maxsize=None)
def _libnvrtc():
    import ctypes

    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return ctypes.CDLL(load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:  # noqa: BLE001 - fall back to CuPy's binding
        return None


def _get_cubin(nvrtc, prog) -> bytes:
    """The whole cubin. CuPy's getCUBIN drops the last byte (it treats the buffer as a C
    string); the driver tolerates that, but cuobjdump and nvdisasm reject the file."""
    import ctypes

    cubin = nvrtc.getCUBIN(prog)
    lib = _libnvrtc()
    if lib is not None:
        size = ctypes.c_size_t()
        if lib.nvrtcGetCUBINSize(ctypes.c_void_p(prog), ctypes.byref(size)) == 0 and size.value == len(cubin) + 1:
            buf = ctypes.create_string_buffer(size.value)
            # Only if it is the same image: were `lib` another copy of NVRTC than CuPy's, the
            # program handle would mean nothing to it.
            if lib.nvrtcGetCUBIN(ctypes.c_void_p(prog), buf) == 0 and buf.raw[:-1] == cubin:
                return buf.raw
    return cubin + b"\0"  # the dropped byte is the NUL padding that ends the ELF image


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line:
            return line.strip()
    return log.strip().splitlines()[-1] if log.strip() else "no log"


def _store(cdir: Path, key: str, c: Compiled) -> None:
    # Write-then-rename so a concurrent reader never sees half a file.
    try:
        cdir.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".cubin", c.cubin),
                             (".json", json.dumps({"resources": asdict(c.resources), "log": c.log}).encode())):
            tmp = cdir / f"{key}{suffix}.{os.getpid()}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, cdir / f"{key}{suffix}")
    except OSError:
        pass  # a cache that cannot be written only costs time


def compile_many(jobs: Iterable[tuple[str, str]], arch: str, workers: int | None = None,
                 use_cache: bool = True) -> list[Compiled | CompileError]:
    """Compile (source, kernel) pairs in parallel threads (NVRTC releases the GIL)."""
    jobs = list(jobs)
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    try:
        _nvrtc()  # loaded (and its environment set) once, before the threads start
    except CompileError:
        pass  # each job reports it

    def one(job):
        try:
            return compile_source(job[0], arch, job[1], use_cache=use_cache)
        except CompileError as exc:
            return exc

    if workers == 1 or len(jobs) <= 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, jobs))
