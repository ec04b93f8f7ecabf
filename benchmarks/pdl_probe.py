"""Probe: the split launch (STREAMK 2) with programmatic dependent launch (sm_90), against the
same split launch launched plainly, whole tiles and cuBLAS, in one process.

    python benchmarks/pdl_probe.py --shapes 4096,8192 [--reps 15] [--calls 20]

Not part of the tuner (the runner launches through CuPy, which has no launch attributes): this
script edits the rendered source -- the main kernel lets its dependents launch as soon as every
one of its blocks has started (`griddepcontrol.launch_dependents`), and the tail kernel waits for
the main kernel's completion only at its very end (`griddepcontrol.wait`), so that nothing after
the tail can overtake the main kernel -- and launches the tail with cuLaunchKernelEx and
programmatic stream serialization. The tail needs nothing from the main kernel (its tiles of C
are others'; _scale_tiles ran before the main kernel), so its blocks may take the SMs that the
last whole wave leaves while that wave drains. Each variant is timed as `calls` launches queued
back to back between two CUDA events, the variants taking turns, medians of `reps` rounds.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("CUPY_TF32", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from _probe import interleaved_ms, load_warptile, seed_params  # noqa: E402

from autotune.render import DEFAULT_KERNEL  # noqa: E402
from autotune.types import Config  # noqa: E402

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("value", ctypes.c_int * 16)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


_cuda = ctypes.CDLL("libcuda.so.1")
_cuda.cuLaunchKernelEx.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_void_p)]


def launch_programmatic(fn, grid, block, smem, stream, args) -> None:
    """fn<<<grid, block, smem, stream>>>(args) with programmatic stream serialization."""
    attr = LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
    attr.value[0] = 1
    cfg = LaunchConfig(grid[0], grid[1], grid[2], block, 1, 1, smem, stream.ptr, ctypes.pointer(attr), 1)
    holders = [a if isinstance(a, ctypes._SimpleCData) else ctypes.c_void_p(a) for a in args]
    params = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    rc = _cuda.cuLaunchKernelEx(ctypes.byref(cfg), ctypes.c_void_p(fn.ptr), params, None)
    if rc != 0:
        raise RuntimeError(f"cuLaunchKernelEx: CUresult {rc}")


def with_pdl(source: str) -> str:
    """The split launch's source with the two grid-dependency instructions added."""
    main = re.search(r"\n" + DEFAULT_KERNEL + r"\(int M.*?\n\{\n", source, re.S)
    source = source[:main.end()] + '    asm volatile("griddepcontrol.launch_dependents;");\n' + source[main.end():]
    end = "\n}\n\n\n// Split launch: the tail's tiles of C scaled"
    assert source.count(end) == 1, "the tail kernel's end moved"
    return source.replace(end, '\n    asm volatile("griddepcontrol.wait;" ::: "memory");' + end)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="4096")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--set", default="", help="params over the first warptile seed, e.g. LANES_N=4")
    args = ap.parse_args()
    base = seed_params(args.set)
    whole, split = load_warptile({**base, "STREAMK": 0}), load_warptile({**base, "STREAMK": 2})
    pdl = load_warptile({**base, "STREAMK": 2}, edit=with_pdl)
    stream = cp.cuda.Stream(non_blocking=True)
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, slots {pdl.slots}, "
          f"params {Config.make('warptile', base).name}")
    i32, f32 = np.int32, np.float32
    for shape in args.shapes.split(","):
        M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
        rng = cp.random.default_rng(1)
        with stream:
            a = rng.random((M, K), dtype=cp.float32) * 2 - 1
            b = rng.random((K, N), dtype=cp.float32) * 2 - 1
            c = cp.empty((M, N), cp.float32)
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
        g = pdl.geometry(M, N, K)
        assert not g["workspace_bytes"] and not g["pack_b"], "the probe takes shapes with N % 4 == 0"

        def pdl_call():
            args_main = [i32(M), i32(N), i32(K), f32(1.0), a, b, f32(0.0), c, np.uint64(0), i32(N)]
            if g["tail_tiles"]:
                pdl.scale_tiles((g["tail_tiles"], 1, 1), (256, 1, 1), (i32(M), i32(N), f32(0.0), c, i32(g["tail_first"])),
                                stream=stream)
            if g["grid"][0]:
                pdl.fn(tuple(g["grid"]), (g["block"], 1, 1), tuple(args_main), shared_mem=g["dynamic_smem"], stream=stream)
            if g["tail_tiles"]:
                ctypes_args = [ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K), ctypes.c_float(1.0), a.data.ptr,
                               b.data.ptr, ctypes.c_float(0.0), c.data.ptr, 0, ctypes.c_int(N), ctypes.c_int(g["tail_first"])]
                launch_programmatic(pdl.tail, (g["tail_grid"], 1, 1), g["block"], g["dynamic_smem"], stream, ctypes_args)

        variants = {
            "cuBLAS": lambda: cp.matmul(a, b, out=c),
            "whole tiles": lambda: whole.launch(M, N, K, a, b, c, stream=stream),
            "split launch": lambda: split.launch(M, N, K, a, b, c, stream=stream),
            "split launch, PDL": pdl_call,
        }
        errors = {}
        with stream:
            for name, fn in variants.items():
                c.fill(cp.nan)
                fn()
                stream.synchronize()
                errors[name] = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
        with stream:
            times = interleaved_ms(variants, args.reps, args.calls, stream)
        flops = 2.0 * M * N * K
        cub = float(np.median(times["cuBLAS"]))
        print(f"== {M}x{N}x{K}: tail {g['tail_tiles']} tiles after {g['grid'][0]}")
        for name in variants:
            ms = float(np.median(times[name]))
            print(f"  {name:18s} {ms:8.4f} ms {flops / ms / 1e9:8.1f} TFLOP/s {cub / ms:6.3f}x cuBLAS  "
                  f"spread {np.ptp(times[name]) / ms:5.1%}  err {errors[name]:.1e}")


if __name__ == "__main__":
    main()
