"""Parallel compiles never fail by chance: NVRTC and its builtins are loaded once per process,
in one thread, before any compile. Each case runs in a fresh process, where NVRTC is not yet
loaded: the first load is what used to fail (`failed to open libnvrtc-builtins.so.13.0`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = sinf(x[threadIdx.x]); }\n'


def _python(code: str, tmp_path, timeout=300) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOTUNE_CACHE=str(tmp_path / "cache"))
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_stress_many_parallel_first_compiles_in_fresh_processes(tmp_path):
    script = ROOT / "benchmarks" / "compile_stress.py"
    args = [sys.executable, str(script), *"--compiles 48 --threads 16 --source tiny".split()]
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("48 compiles, 0 builtins failures, 0 failures in all"), r.stdout + r.stderr
    assert r.returncode == 0


def test_threads_that_race_the_first_load_all_compile(tmp_path):
    # cuda-pathfinder maps libnvrtc, then preloads its builtins; a thread starting in between
    # used to find libnvrtc "already loaded", skip the preload and fail its compile. The
    # preload is slowed down here so that every thread after the first starts in between. CuPy
    # is imported first, as in a process that probed the GPU: otherwise the threads queue on
    # the import lock for most of that window.
    code = f"""
import json, threading, time
import cupy
from cupy_backends.cuda.libs import nvrtc
import cuda.pathfinder._dynamic_libs.load_dl_linux as L
name = next((n for n in ("_preload_nvrtc_builtins", "_work_around_known_bugs") if hasattr(L, n)), None)
if name is None:
    print(json.dumps({{"skip": "this cuda-pathfinder preloads no NVRTC builtins"}})); raise SystemExit
slow_preload, original = [], getattr(L, name)
def slow(*args, **kwargs):
    slow_preload.append(threading.current_thread().name)
    time.sleep(0.5)
    return original(*args, **kwargs)
setattr(L, name, slow)
from autotune.gpu.compile import CompileError, compile_source
results = []
def one(i):
    try:
        compile_source({SOURCE!r} + f"// {{i}}\\n", "sm_90", "k", use_cache=False)
        results.append("ok")
    except CompileError as exc:
        results.append(str(exc)[:200])
threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
for t in threads:
    t.start(); time.sleep(0.05)
for t in threads:
    t.join()
print(json.dumps({{"results": results, "slow_preload": slow_preload}}))
"""
    out = _python(code, tmp_path)
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["slow_preload"], "the slowed preload never ran: the race was not set up"
    assert out["results"] == ["ok"] * 6


def test_compiles_work_when_another_library_mapped_libnvrtc_first(tmp_path):
    # Another package (numba, cuda-python, ...) mapping libnvrtc before CuPy's first call makes
    # cuda-pathfinder skip its builtins preload; with the wheel's libnvrtc, which has no
    # RUNPATH, every compile of the process then failed. `raw` is what CuPy alone does there
    # (it fails wherever the builtins are on no system library path, as on CI).
    code = f"""
import ctypes, glob, json, os, site, time
paths = [p for d in site.getsitepackages()
         for p in sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libnvrtc.so.*")))]
if not paths:
    print(json.dumps({{"skip": "no NVRTC wheel in site-packages"}})); raise SystemExit
ctypes.CDLL(paths[0])
from cupy_backends.cuda.libs import nvrtc
prog = nvrtc.createProgram({SOURCE!r}, "k.cu", [], [])
try:
    nvrtc.compileProgram(prog, ["--gpu-architecture=sm_90"]); raw = "ok"
except nvrtc.NVRTCError as exc:
    raw = str(exc)[:200]
from autotune.gpu.compile import CompileError, compile_many
jobs = [({SOURCE!r} + f"// {{i}} {{time.time_ns()}}\\n", "k") for i in range(8)]
out = compile_many(jobs, "sm_90", workers=8, use_cache=False)
print(json.dumps({{"raw": raw, "errors": [str(r)[:200] for r in out if isinstance(r, CompileError)]}}))
"""
    out = _python(code, tmp_path)
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["errors"] == [], out
