"""On the GPU: examples/sgemm_dispatch.cu with the dispatching header of the checkout's records for
this GPU, every result checked against cublasSgemm, each shape's time beside cuBLAS's."""

import subprocess
from pathlib import Path

import pytest
from helpers import have_nvcc

from autotune.dispatch.header import export_dispatch
from autotune.dispatch.table import table_for
from autotune.records.results import live_gpu_slug

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def _shipped():
    """Return this GPU's results-folder slug and its shipped records, smallest first (else skip)."""
    slug = live_gpu_slug()
    if slug is None or not (ROOT / "results" / slug).is_dir():
        pytest.skip(f"no shipped results for this GPU ({slug})")
    return slug, sorted(table_for(ROOT / "results", slug).records, key=lambda r: r[0].flops)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_the_dispatch_example_matches_cublas_at_a_seeded_draw(tmp_path):
    slug, records = _shipped()
    # Six records spread over the folder's sizes, small to large: nvcc builds a header in minutes
    # per few dozen kernels, and the dispatch's choices among six tuned shapes are the same code.
    picked = [records[round(i * (len(records) - 1) / 5)][0] for i in range(6)] if len(records) > 6 else None
    export_dispatch(ROOT / "results", slug, tmp_path / "tuned_sgemm.h", shapes=picked)
    exe = tmp_path / "sgemm_dispatch"
    build = subprocess.run(
        [
            "nvcc",
            "-O2",
            "-arch=sm_90",
            f"-I{tmp_path}",
            str(ROOT / "examples" / "sgemm_dispatch.cu"),
            "-lcublas",
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    # The same draw with padded leading dimensions (most not a multiple of 4), then rounded up to
    # 16-byte columns: the two apart say what the pitches cost.
    for mode in ("padded", "aligned"):
        run = subprocess.run([str(exe), "57", "24", mode], capture_output=True, text=True, timeout=600)
        print(run.stdout)  # the figures, for the log (-s)
        assert run.returncode == 0 and f"{mode} leading dimensions); all ok" in run.stdout, run.stdout + run.stderr
    bad = subprocess.run([str(exe), "57", "24", "tight"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout.startswith("usage:"), bad.stdout
    # One named shape: 4096^3 with every leading dimension one past the rows (not a multiple of 4).
    one = subprocess.run([str(exe), "4096x4096x4096", "NT", "1"], capture_output=True, text=True, timeout=300)
    print(one.stdout)
    assert one.returncode == 0 and "NT, leading dimensions 1 past the rows" in one.stdout, one.stdout + one.stderr
    assert "all ok" in one.stdout, one.stdout
    for argv in (["4096x4096x4096", "NX"], ["4096x4096", "NN"], ["4096x4096x4096", "NN", "65"]):
        bad = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and bad.stdout.startswith("usage:"), (argv, bad.stdout)


# Calls with beta != 0 through a header built with AUTOTUNE_WITH_CUBLAS: the first times into a
# scratch C, so C (and its padding) must hold exactly one product; the calls after it run the winner.
_BETA_PROGRAM = r"""
#include <cmath>
#include <cstdio>
#include <vector>
#include <cublas_v2.h>
#include "tuned_sgemm.h"
int main()
{
    const int shapes[][3] = {{300, 200, 100}, {33, 1, 700}, {1000, 777, 333}, {8, 4000, 64}, {4096, 96, 40}};
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 2;
    int bad = 0, by_cublas = 0;
    for (int t = 0; t < 10; ++t) {
        const int m = shapes[t % 5][0], n = shapes[t % 5][1], k = shapes[t % 5][2];
        const char ta = "NT"[t / 5], tb = 'N';
        const int lda = (ta == 'N' ? m : k) + 1, ldb = k + 3, ldc = m + 2;
        const size_t na = (size_t)lda * (ta == 'N' ? k : m), nb = (size_t)ldb * n, nc = (size_t)ldc * n;
        std::vector<float> ha(na), hb(nb), hc0(nc), hc(nc), hr(nc);
        for (size_t i = 0; i < na; ++i) ha[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        for (size_t i = 0; i < nb; ++i) hb[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
        for (size_t i = 0; i < nc; ++i) hc0[i] = (float)((i * 29) % 89) / 89.0f - 0.5f;
        float *A, *B, *C, *R;
        cudaMalloc(&A, na * 4); cudaMalloc(&B, nb * 4); cudaMalloc(&C, nc * 4); cudaMalloc(&R, nc * 4);
        cudaMemcpy(A, ha.data(), na * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(B, hb.data(), nb * 4, cudaMemcpyHostToDevice);
        const float alpha = 0.5f, beta = 0.75f;
        for (int call = 0; call < 3; ++call) {
            cudaMemcpy(C, hc0.data(), nc * 4, cudaMemcpyHostToDevice);
            cudaMemcpy(R, hc0.data(), nc * 4, cudaMemcpyHostToDevice);
            if (autotune_sgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) != cudaSuccess) return 3;
            const cublasOperation_t oa = ta == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
            cublasSgemm(h, oa, CUBLAS_OP_N, m, n, k, &alpha, A, lda, B, ldb, &beta, R, ldc);
            cudaMemcpy(hc.data(), C, nc * 4, cudaMemcpyDeviceToHost);
            cudaMemcpy(hr.data(), R, nc * 4, cudaMemcpyDeviceToHost);
            double err = 0.0, norm = 0.0;
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < ldc; ++i) {
                    const size_t x = (size_t)j * ldc + i;
                    if (i >= m) { bad += hc[x] != hc0[x]; continue; }  // the padding: untouched
                    err += (hc[x] - hr[x]) * (double)(hc[x] - hr[x]); norm += (double)hr[x] * hr[x];
                }
            if (!(std::sqrt(err) <= 1e-5 * std::sqrt(norm))) {
                ++bad;
                std::printf("wrong: %d %d %d %c call %d\n", m, n, k, ta, call);
            }
        }
        by_cublas += autotune_runs_cublas(0, ta == 'T', n, m, k, 1, 1);
        cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(R);
    }
    std::printf("%d of 10 on cuBLAS; %s\n", by_cublas, bad ? "WRONG" : "all ok");
    return bad ? 1 : 0;
}
"""


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_a_header_with_cublas_times_the_first_call_and_keeps_c_whole(tmp_path):
    slug, records = _shipped()
    export_dispatch(ROOT / "results", slug, tmp_path / "tuned_sgemm.h", shapes=[records[len(records) // 2][0]])
    (tmp_path / "beta.cu").write_text(_BETA_PROGRAM)
    flags = ["-O2", "-arch=sm_90", "-DAUTOTUNE_WITH_CUBLAS", f"-I{tmp_path}"]
    for name, source in (("beta", tmp_path / "beta.cu"), ("example", ROOT / "examples" / "sgemm_dispatch.cu")):
        build = subprocess.run(
            ["nvcc", *flags, str(source), "-lcublas", "-o", str(tmp_path / name)], capture_output=True, text=True
        )
        assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "beta")], capture_output=True, text=True, timeout=300)
    print(run.stdout)
    assert run.returncode == 0 and "all ok" in run.stdout, run.stdout + run.stderr
    run = subprocess.run([str(tmp_path / "example"), "58", "12", "padded"], capture_output=True, text=True, timeout=600)
    print(run.stdout)  # the figures, for the log (-s)
    assert run.returncode == 0 and "all ok" in run.stdout, run.stdout + run.stderr
