"""On the GPU: exported headers in one program -- two prefixes, one header in two .cu files -- run
from several threads on every device, each result checked against a host product."""

import subprocess

import pytest
from helpers import GPU, have_nvcc
from helpers import record_entry as _entry

from autotune.core.types import Problem
from autotune.records.export import export
from autotune.records.store import update_record

pytestmark = pytest.mark.gpu

# Over 48 KB of dynamic shared memory: its launcher opts in, once per device.
WARPTILE = dict(
    BM=128, BN=256, BK=8, WARPS_M=2, WARPS_N=4, LANES_N=8, TM=8, TN=4, STAGES=4, PAD_A=4, PAD_B=0,
    GROUP_M=8, SPLITK=1, MINB=1, PREFETCH=0, MMA_ORDER=0,
)  # fmt: skip

# Each thread takes a device (thread i the device i % count), and runs C = A @ B (row-major,
# 300 x 200 x 100, padded pitches) through big.h from this file or from other.cu, and through
# small.h, each checked against the host's product.
MAIN = r"""#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>
#include "big.h"
#include "small.h"

cudaError_t big_in_other_file(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc);

static int run(int id, int devices)
{
    const int m = 300, n = 200, k = 100, lda = k + 3, ldb = n + 5, ldc = n + 1;
    if (cudaSetDevice(id % devices) != cudaSuccess) return 1;
    std::vector<float> a((size_t)m * lda), b((size_t)k * ldb), want((size_t)m * n, 0.0f);
    unsigned s = 12345u + id;
    for (float& x : a) { s = s * 1664525u + 1013904223u; x = (float)((s >> 8) % 17) - 8.0f; }
    for (float& x : b) { s = s * 1664525u + 1013904223u; x = (float)((s >> 8) % 13) - 6.0f; }
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
            for (int p = 0; p < k; ++p) want[(size_t)i * n + j] += a[(size_t)i * lda + p] * b[(size_t)p * ldb + j];
    float *A, *B, *C;
    if (cudaMalloc(&A, a.size() * 4) || cudaMalloc(&B, b.size() * 4) || cudaMalloc(&C, (size_t)m * ldc * 4)) return 1;
    cudaMemcpy(A, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(B, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    int bad = 0;
    for (int how = 0; how < 3; ++how) {
        cudaMemset(C, 0, (size_t)m * ldc * 4);
        cudaError_t e = how == 0 ? big_sgemm_row_major(m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, 0)
                      : how == 1 ? big_in_other_file(m, n, k, A, lda, B, ldb, C, ldc)
                                 : small_sgemm_row_major(m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, 0);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        std::vector<float> got((size_t)m * ldc);
        cudaMemcpy(got.data(), C, got.size() * 4, cudaMemcpyDeviceToHost);
        int wrong = 0;
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j)  // exact: small integers
                wrong += got[(size_t)i * ldc + j] != want[(size_t)i * n + j];
        if (e != cudaSuccess || wrong) {
            std::printf("thread %d device %d way %d: %s, %d wrong\n", id, id % devices, how,
                        cudaGetErrorString(e), wrong);
            bad = 1;
        }
    }
    cudaFree(A); cudaFree(B); cudaFree(C);
    return bad;
}

int main()
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) return 2;
    const int threads = 4 * devices;
    std::vector<int> bad(threads, 0);
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) pool.emplace_back([&bad, i, devices] { bad[i] = run(i, devices); });
    for (auto& t : pool) t.join();
    int failed = 0;
    for (int x : bad) failed += x;
    std::printf("%d threads on %d devices, %d failed\n", threads, devices, failed);
    return failed ? 1 : 0;
}
"""
OTHER = r"""#include "big.h"
cudaError_t big_in_other_file(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc)
{
    return big_sgemm_row_major(m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, 0);
}
"""


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_headers_of_two_prefixes_in_two_files_run_from_threads_on_every_device(tmp_path, h100):
    """big.h (warptile, over 48 KB of shared memory) included in two .cu files, small.h (tiled)
    beside it; threads on every device at once (each device's first launch must opt in there)
    get exact products from each."""
    P = Problem(1000, 1000, 1000)
    update_record(tmp_path, GPU, P, {"warptile": _entry("warptile", WARPTILE, 1000.0, h100, P)})
    small = Problem(64, 64, 64)
    update_record(tmp_path, GPU, small, {"tiled": _entry("tiled", {"TILE": 16}, 1000.0, h100, small)})
    export(tmp_path, GPU["slug"], P, tmp_path / "big.h", prefix="big")
    export(tmp_path, GPU["slug"], small, tmp_path / "small.h", prefix="small")
    (tmp_path / "main.cu").write_text(MAIN)
    (tmp_path / "other.cu").write_text(OTHER)
    exe = tmp_path / "main"
    flags = ["-Xcompiler", "-Wall,-Wextra,-pthread", "-Werror", "all-warnings"]
    b = subprocess.run(
        ["nvcc", "-arch=sm_90", "-O2", *flags, "-o", str(exe), str(tmp_path / "main.cu"), str(tmp_path / "other.cu")],
        capture_output=True,
        text=True,
    )
    assert b.returncode == 0 and "warning" not in b.stderr.lower(), b.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and ", 0 failed" in r.stdout, r.stdout + r.stderr
