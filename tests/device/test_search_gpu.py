"""On the GPU: a small real search end to end; its exported header built with nvcc and run at
an awkward shape against a float64 host reference; check against its own result."""

import shutil
import subprocess
import sys

import pytest

from autotune.records.results import load_record

pytestmark = pytest.mark.gpu

HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include "tuned.h"
#ifndef SHAPE_M
#define SHAPE_M 77
#define SHAPE_N 93
#define SHAPE_K 45
#endif
int main() {
    const int M = SHAPE_M, N = SHAPE_N, K = SHAPE_K;
    std::vector<float> a(M * K), b(K * N), c(M * N), c0(M * N);
    srand(1);
    for (auto& x : a) x = rand() / (float)RAND_MAX * 2 - 1;
    for (auto& x : b) x = rand() / (float)RAND_MAX * 2 - 1;
    for (auto& x : c0) x = rand() / (float)RAND_MAX * 2 - 1;
    float *da, *db, *dc;
    cudaMalloc(&da, a.size() * 4); cudaMalloc(&db, b.size() * 4); cudaMalloc(&dc, c.size() * 4);
    cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dc, c0.data(), c0.size() * 4, cudaMemcpyHostToDevice);
    const float alpha = 1.5f, beta = -0.5f;
    cudaError_t e = autotune_sgemm(M, N, K, alpha, da, db, beta, dc);
    if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) { printf("launch failed\n"); return 2; }
    cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost);
    double num = 0, den = 0;
    for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) {
        double r = beta * (double)c0[i * N + j];
        for (int k = 0; k < K; ++k) r += alpha * (double)a[i * K + k] * b[k * N + j];
        num += (c[i * N + j] - r) * (c[i * N + j] - r); den += r * r;
    }
    printf("relative error %.3e\n", sqrt(num / den));
    return sqrt(num / den) < 1e-5 ? 0 : 1;
}
"""


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_small_search_export_check(tmp_path):
    r = _cli(
        "search",
        "--size",
        "512",
        "--family",
        "vectorized",
        "warptile",
        "--trials",
        "6",
        "--results",
        str(tmp_path / "results"),
        "--quiet",
        cwd=tmp_path,
    )
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    files = list((tmp_path / "results").glob("*/512x512x512.json"))
    assert len(files) == 1
    rec = load_record(files[0])
    for fam in ("vectorized", "warptile"):
        e = rec["families"][fam]
        assert e["status"] == "ok" and e["error"] < 1e-5 and e["gflops"] > 0 and e["cublas"]["gflops"] > 0
    for fam in ("vectorized", "warptile"):
        r = _cli(
            "export",
            "--size",
            "512",
            "--family",
            fam,
            "--results",
            str(tmp_path / "results"),
            "-o",
            str(tmp_path / "tuned.h"),
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        (tmp_path / "main.cu").write_text(HARNESS)
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        b = subprocess.run(
            [nvcc, "-arch=sm_90", "-o", str(tmp_path / "main"), str(tmp_path / "main.cu")],
            capture_output=True,
            text=True,
        )
        assert b.returncode == 0, b.stderr
        run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True)
        print(fam, run.stdout)
        assert run.returncode == 0, run.stdout + run.stderr
    r = _cli("check", "--results", str(tmp_path / "results"), "--tolerance", "0.5", cwd=tmp_path)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_search_with_beta_times_both_sides_with_it_and_check_does_too(tmp_path):
    """--beta 3: the candidates and cuBLAS (gemm only: cupy.matmul has no beta) timed with C read
    and scaled, into a record of its own that check re-times the same way."""
    results = tmp_path / "results"
    r = _cli("search", "--sizes", "384x256x200", "--beta", "3", "--family", "vectorized", "warptile", "--trials", "4",
             "--results", str(results), "--quiet", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (path,) = results.glob("*/*.json")
    assert path.name == "384x256x200_beta3.json"
    rec = load_record(path)
    assert rec["problem"]["beta"] == 3.0
    for e in rec["families"].values():
        assert e["status"] == "ok" and e["error"] < 1e-5 and e["gflops"] > 0
        assert e["cublas"]["path"] == "gemm" and set(e["cublas"]["paths"]) == {"gemm"}
    r = _cli("check", "--results", str(results), "--tolerance", "0.5", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    "schedule, shape",
    [
        ("stream_k", (300, 521, 700)),
        ("split_launch", (300, 521, 700)),
        ("split_launch", (2500, 4100, 100)),
        ("split_persistent", (2500, 4100, 100)),
        ("split_fused", (2500, 4100, 100)),
    ],
)
def test_exported_stream_k_header_with_packed_b_runs(tmp_path, schedule, shape):
    """A stream-K or split-launch config exported and built with nvcc: its launcher sizes the
    grid from the occupancy API, packs B (N % 4 != 0), allocates and zeroes the workspace (and
    frees it all); a split launch scales the tail's tiles of C, runs the main kernel where whole
    waves exist (the second shape) and then the tail; in one kernel (split_persistent and
    split_fused), the kernel does all of that over a zeroed workspace."""
    from autotune.kernels.space import Space
    from autotune.records.export import header_for_entry

    seeds = Space.load("warptile").seeds
    seed = next(c for c in seeds if c["SCHEDULE"] == "stream_k") if schedule == "stream_k" else seeds[0]
    params = {**seed.as_dict(), "SCHEDULE": schedule}
    M, N, K = shape
    rec = {"problem": {"M": M, "N": N, "K": K}, "gpu": {"name": "test", "arch": "sm_90"}}
    entry = {
        "config": {"family": "warptile", "params": params, "name": seed.name},
        "gflops": 1.0,
        "ratio": 1.0,
        "registers": 0,
        "smem_bytes": 0,
    }
    text = header_for_entry(rec, entry, "tuned.h")
    assert "_pack_b<<<" in text and "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in text
    assert ("_tail<<<" in text and "_scale_tiles<<<" in text) == (schedule == "split_launch")
    (tmp_path / "tuned.h").write_text(text)
    (tmp_path / "main.cu").write_text(f"#define SHAPE_M {M}\n#define SHAPE_N {N}\n#define SHAPE_K {K}\n" + HARNESS)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    b = subprocess.run(
        [nvcc, "-arch=sm_90", "-o", str(tmp_path / "main"), str(tmp_path / "main.cu")], capture_output=True, text=True
    )
    assert b.returncode == 0, b.stderr
    run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
