"""The exported library against autotune.matmul at every tuned shape of this GPU, in one process.

    python benchmarks/header_tuned.py --out header_tuned.json        # needs nvcc, cuBLAS, a GPU
    python benchmarks/header_tuned.py --without-cublas               # the held picks alone

Exports `autotune export --library` of this GPU's records, builds it (its files at once, with
-DAUTOTUNE_WITH_CUBLAS unless told not to) into a shared object beside a small C shim, and at each
tuned shape (layout, batch) runs the library's row-major call and `autotune.matmul(A, B, out=C)` on
the same operands: each result checked against float64, each timed the same way (CUDA events around
REPS calls after a warm-up, the median of 5 rounds, the two sides interleaved). Prints a line per
shape with which kernel the library ran (its index, or cuBLAS) and matmul's time over the library's.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("CUPY_TF32", "0")

import cupy as cp
from untuned import gpu_ms  # benchmarks/untuned.py's timer: the same on both sides here as there

import autotune
from autotune.dispatch import api
from autotune.dispatch.table import table_for

SHIM = r"""#include "autotune_sgemm.h"
#define ROW(ns) ns::autotune_sgemm_strided_batched_row_major(m, n, k, 1.0f, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc, \
                                                              batch, (cudaStream_t)stream)
extern "C" int row(int layout, int m, int n, int k, const float* A, int lda, long long sa, const float* B, int ldb,
                   long long sb, float* C, int ldc, long long sc, int batch, void* stream)
{
    switch (layout) {
    case 0: return (int)ROW(autotune_nn);
    case 1: return (int)ROW(autotune_nt);
    case 2: return (int)ROW(autotune_tn);
    default: return (int)ROW(autotune_tt);
    }
}
extern "C" int ran_cublas(int ta, int tb, long long m, long long n, long long k, long long batch)
{
    return autotune_runs_cublas(ta, tb, m, n, k, batch, 0);
}
extern "C" int choice(int ta, int tb, long long m, long long n, long long k, long long batch)
{
    return autotune_choose(ta, tb, m, n, k, batch, 0);
}
"""
LAYOUTS = ("nn", "nt", "tn", "tt")


def build(slug: str, folder: Path, cublas: bool) -> ctypes.CDLL:
    """Export this GPU's library into `folder`, build it with the shim, and load it."""
    subprocess.run(
        [sys.executable, "-m", "autotune.cli", "export", "--gpu", slug, "--library", str(folder)], check=True
    )
    flags = ["nvcc", "-O2", "-arch=sm_90", "-Xcompiler", "-fPIC", f"-I{folder}/include", f"-I{folder}/src"]
    flags += ["-DAUTOTUNE_WITH_CUBLAS"] if cublas else []
    (folder / "shim.cu").write_text(SHIM)
    sources = sorted(folder.glob("src/*.cu")) + [folder / "shim.cu"]
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(lambda s: subprocess.run([*flags, "-c", str(s), "-o", f"{s}.o"], check=True), sources))
    lib = folder / "library.so"
    subprocess.run(["nvcc", "-shared", "-o", str(lib), *(f"{s}.o" for s in sources), "-lcublas"], check=True)
    dll = ctypes.CDLL(str(lib))
    i, p, ll = ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong
    dll.row.argtypes = [i, i, i, i, p, i, ll, p, i, ll, p, i, ll, i, p]
    for name in ("ran_cublas", "choice"):
        getattr(dll, name).argtypes = [i, i, ll, ll, ll, ll]
    return dll


def measure(dll, M: int, N: int, K: int, layout: str, batch: int) -> dict:
    """Time the library's call and matmul's at one shape, both checked against float64."""
    ta, tb = layout[0] == "t", layout[1] == "t"
    rng = cp.random.default_rng(1)
    lead = (batch,) if batch > 1 else ()
    a = rng.random((*lead, *((K, M) if ta else (M, K))), dtype=cp.float32) - 0.5
    b = rng.random((*lead, *((N, K) if tb else (K, N))), dtype=cp.float32) - 0.5
    av, bv = (a.swapaxes(-1, -2) if ta else a), (b.swapaxes(-1, -2) if tb else b)
    mine, theirs = cp.empty((*lead, M, N), dtype=cp.float32), cp.empty((*lead, M, N), dtype=cp.float32)
    strides = (a[0].size, b[0].size, M * N) if batch > 1 else (0, 0, 0)
    at, bt, ct, s = a.data.ptr, b.data.ptr, theirs.data.ptr, cp.cuda.get_current_stream().ptr
    lda, ldb, code = a.shape[-1], b.shape[-1], LAYOUTS.index(layout)

    def lib():
        return dll.row(code, M, N, K, at, lda, strides[0], bt, ldb, strides[1], ct, N, strides[2], batch, s)

    def ours():
        return autotune.matmul(av, bv, out=mine)

    status = lib()
    ours()
    ref = cp.matmul(av.astype(cp.float64), bv.astype(cp.float64))
    errs = [float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref)) for c in (mine, theirs)]
    reps = int(min(100, max(3, 10 / max(gpu_ms(ours, 1), 1e-3))))
    t_lib, t_ours = [], []
    for _ in range(5):
        lib(), ours(), lib(), ours()
        t_lib.append(gpu_ms(lib, reps))
        t_ours.append(gpu_ms(ours, reps))
    ms_lib, ms_ours = statistics.median(t_lib), statistics.median(t_ours)
    name = f"{M}x{N}x{K}" + ("" if layout == "nn" else f"_{layout}") + (f"_b{batch}" if batch > 1 else "")
    ok = status == 0 and max(errs) < 1e-4
    ran = "cuBLAS" if dll.ran_cublas(ta, tb, M, N, K, batch) else f"kernel {dll.choice(ta, tb, M, N, K, batch)}"
    return {"shape": name, "library_ms": ms_lib, "matmul_ms": ms_ours, "x": ms_ours / ms_lib, "ran": ran, "ok": ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--without-cublas", action="store_true", help="build the library without the cuBLAS timing")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args()
    slug = api._device_props(cp.cuda.Device().id)[0]
    shapes = sorted({(p.M, p.N, p.K, p.layout, p.batch) for p, _ in table_for(None, slug).records})
    with tempfile.TemporaryDirectory() as tmp:
        dll = build(slug, Path(tmp), not args.without_cublas)
        rows = []
        for shape in shapes:
            r = measure(dll, *shape)
            rows.append(r)
            line = f"{r['shape']:24s} library {1e3 * r['library_ms']:9.1f} us ({r['ran']:10s})"
            print(f"{line}  matmul {1e3 * r['matmul_ms']:9.1f} us  x {r['x']:5.3f}  {'ok' if r['ok'] else 'WRONG'}")
    xs = [r["x"] for r in rows]
    mean = math.exp(statistics.fmean(map(math.log, xs)))
    print(f"library at {len(rows)} tuned shapes: geomean {mean:.3f}x (matmul's time over the library's), ", end="")
    print(f"lowest {min(xs):.3f}; wrong {sum(not r['ok'] for r in rows)}")
    if args.out:
        args.out.write_text(json.dumps({"command": sys.argv, "gpu": slug, "rows": rows}, indent=1))
    return 1 if any(not r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
