// The dispatching header against cublasSgemm at a seeded draw of shapes nobody tuned.
//
//   autotune export --gpu nvidia-h100-80gb-hbm3 -o tuned_sgemm.h     # every record: one header
//   nvcc -O2 -arch=sm_90 -I. examples/sgemm_dispatch.cu -lcublas -o sgemm_dispatch
//   ./sgemm_dispatch [seed] [shapes] [padded|aligned]                 # default 57 24 padded
//   ./sgemm_dispatch 4096x4096x4096 NN 1                              # one shape, op, extra rows
// Built with -DAUTOTUNE_WITH_CUBLAS, each shape's first call times the header's kernel against
// cuBLAS and the calls after it run the faster (the kernel column then says "cuBLAS" where it won).
// Or linked against the same kernels as a static library (built once, its files in parallel):
//   autotune export --gpu nvidia-h100-80gb-hbm3 --library tuned_lib && echo '#include "autotune_sgemm.h"' > tuned_sgemm.h
//   cmake -S tuned_lib -B tuned_lib/build && cmake --build tuned_lib/build -j
//   nvcc -O2 -arch=sm_90 -I. -Ituned_lib/include examples/sgemm_dispatch.cu tuned_lib/build/libautotune_sgemm.a -lcublas -o sgemm_dispatch
//
// Each shape (square, skinny, a few rows or columns, short and deep K; column-major with padded
// leading dimensions, most not a multiple of 4, or with `aligned` the same draw with each leading
// dimension rounded up to a multiple of 4 floats (16-byte columns); all four transposes) runs through autotune_sgemm and cublasSgemm on the same
// operands; every result is checked against cuBLAS's, and each side is timed the same way (CUDA
// events around REPS calls after a warm-up, the median of 5 such runs). Prints a line per shape
// and the geometric mean of cuBLAS's time over ours; exits 1 on any wrong result.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "tuned_sgemm.h"

#define CHECK(x) do { if ((x) != 0) { std::printf("failed: %s (line %d)\n", #x, __LINE__); std::exit(2); } } while (0)

struct Shape { int m, n, k; char ta, tb; int pad; };

static std::vector<Shape> draw(unsigned seed, int count)
{
    std::mt19937 rng(seed);
    auto dim = [&](double lo, double hi) { return (int)std::lround(std::exp2(std::uniform_real_distribution<double>(lo, hi)(rng))); };
    std::vector<Shape> out;
    for (int i = 0; i < count; ++i) {
        Shape s;
        switch (i % 6) {  // the regimes in turn
        case 0: s.m = s.n = s.k = dim(8, 12.5); break;                          // square
        case 1: s.m = dim(0, 5); s.n = dim(11, 13.5); s.k = dim(10, 13); break; // a few rows
        case 2: s.m = dim(11, 13.5); s.n = dim(0, 5); s.k = dim(10, 13); break; // a few columns
        case 3: s.m = dim(10, 13); s.n = dim(10, 13); s.k = dim(2, 7); break;   // short K
        case 4: s.m = dim(6, 9); s.n = dim(6, 9); s.k = dim(12, 15); break;     // deep K
        default: s.m = dim(7, 12); s.n = dim(5, 12); s.k = dim(5, 12); break;   // skinny / odd
        }
        s.ta = "NT"[(i / 2) % 2]; s.tb = "NT"[(i / 3) % 2 ^ (i % 2)];
        s.pad = 1 + (int)(rng() % 7);  // leading dimensions past the rows, most not a multiple of 4
        out.push_back(s);
    }
    return out;
}

template <class F> static float median_ms(F call, int reps)
{
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    call(); CHECK(cudaDeviceSynchronize());  // the warm-up
    std::vector<float> runs;
    for (int r = 0; r < 5; ++r) {
        CHECK(cudaEventRecord(a));
        for (int i = 0; i < reps; ++i) call();
        CHECK(cudaEventRecord(b)); CHECK(cudaEventSynchronize(b));
        float ms = 0.0f; CHECK(cudaEventElapsedTime(&ms, a, b));
        runs.push_back(ms / reps);
    }
    cudaEventDestroy(a); cudaEventDestroy(b);
    std::sort(runs.begin(), runs.end());
    return runs[2];
}

// One shape instead of the draw: "MxNxK" [op: NN, NT, TN or TT] [pad: extra rows, 0-64].
static bool one_shape(int argc, char** argv, Shape& s)
{
    char tail = 0;
    const std::string op = argc > 2 ? argv[2] : "NN";
    char* end = nullptr;
    s.pad = argc > 3 ? (int)std::strtol(argv[3], &end, 10) : 1;
    if (argc > 3 && (end == argv[3] || *end != '\0')) return false;
    if (argc > 4 || std::sscanf(argv[1], "%dx%dx%d%c", &s.m, &s.n, &s.k, &tail) != 3 || s.m < 1 || s.n < 1 ||
        s.k < 1 || op.size() != 2 || (op[0] != 'N' && op[0] != 'T') || (op[1] != 'N' && op[1] != 'T') ||
        s.pad < 0 || s.pad > 64)
        return false;
    s.ta = op[0]; s.tb = op[1];
    return true;
}

int main(int argc, char** argv)
{
    const bool single = argc > 1 && std::string(argv[1]).find('x') != std::string::npos;
    Shape given{};
    const unsigned seed = argc > 1 && !single ? (unsigned)std::atoi(argv[1]) : 57u;
    const int count = single ? 1 : argc > 2 ? std::atoi(argv[2]) : 24;
    const std::string mode = argc > 3 && !single ? argv[3] : "padded";
    if (single ? !one_shape(argc, argv, given) : (argc > 4 || count < 1 || (mode != "padded" && mode != "aligned"))) {
        std::printf("usage: %s [seed] [shapes >= 1] [padded|aligned]\n"
                    "       %s MxNxK [NN|NT|TN|TT] [pad 0-64]\n", argv[0], argv[0]);
        return 2;
    }
    // The same shapes and pads either way: `aligned` only rounds each leading dimension up.
    auto ld = [&](int rows, int pad) { return mode == "aligned" ? (rows + pad + 3) / 4 * 4 : rows + pad; };
    cublasHandle_t handle;
    CHECK(cublasCreate(&handle));
    double log_sum = 0.0;
    int wrong = 0;
    std::printf("%-22s %-3s %9s %9s %6s  %s\n", "m x n x k", "op", "ours us", "cuBLAS us", "ratio", "kernel");
    for (const Shape& s : single ? std::vector<Shape>{given} : draw(seed, count)) {
        // Column-major: op(A) is m x k, op(B) k x n, C m x n; each stored with `pad` extra rows.
        const int a_rows = s.ta == 'N' ? s.m : s.k, a_cols = s.ta == 'N' ? s.k : s.m;
        const int b_rows = s.tb == 'N' ? s.k : s.n, b_cols = s.tb == 'N' ? s.n : s.k;
        const int lda = ld(a_rows, s.pad), ldb = ld(b_rows, s.pad), ldc = ld(s.m, s.pad);
        std::vector<float> ha((size_t)lda * a_cols), hb((size_t)ldb * b_cols);
        std::mt19937 fill(seed + s.m);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (float& x : ha) x = u(fill);
        for (float& x : hb) x = u(fill);
        float *A, *B, *C, *R;
        const size_t c_size = (size_t)ldc * s.n;
        CHECK(cudaMalloc(&A, ha.size() * 4)); CHECK(cudaMalloc(&B, hb.size() * 4));
        CHECK(cudaMalloc(&C, c_size * 4)); CHECK(cudaMalloc(&R, c_size * 4));
        CHECK(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(C, 0, c_size * 4)); CHECK(cudaMemset(R, 0, c_size * 4));
        const float one = 1.0f, zero = 0.0f;
        const cublasOperation_t oa = s.ta == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, ob = s.tb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
        auto ours = [&] { CHECK(autotune_sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc)); };
        auto theirs = [&] { CHECK(cublasSgemm(handle, oa, ob, s.m, s.n, s.k, &one, A, lda, B, ldb, &zero, R, ldc)); };
        ours(); theirs();
        std::vector<float> hc(c_size), hr(c_size);
        CHECK(cudaMemcpy(hc.data(), C, c_size * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(hr.data(), R, c_size * 4, cudaMemcpyDeviceToHost));
        double err = 0.0, norm = 0.0;
        for (int j = 0; j < s.n; ++j)
            for (int i = 0; i < s.m; ++i) {
                const double d = hc[(size_t)j * ldc + i] - hr[(size_t)j * ldc + i];
                err += d * d; norm += (double)hr[(size_t)j * ldc + i] * hr[(size_t)j * ldc + i];
            }
        const bool ok = std::sqrt(err) <= 1e-4 * std::sqrt(norm) + 1e-30;  // relative, in the Frobenius norm
        const double flops = 2.0 * s.m * s.n * s.k;
        const int reps = (int)std::max(3.0, std::min(200.0, 2e10 / flops));
        const float t_ours = median_ms(ours, reps), t_cublas = median_ms(theirs, reps);
        log_sum += std::log(t_cublas / t_ours);
        wrong += !ok;
        char name[48];
        std::snprintf(name, sizeof name, "%d x %d x %d", s.m, s.n, s.k);
        // The row-major problem the header runs: (n, m, k) with the transposes swapped.
        const int kernel = autotune_choose(s.tb == 'T', s.ta == 'T', s.n, s.m, s.k, 1, 0);
#if defined(AUTOTUNE_WITH_CUBLAS) || defined(AUTOTUNE_SGEMM_LIBRARY_H)  // the library declares it either way
        const bool by_cublas = autotune_runs_cublas(s.tb == 'T', s.ta == 'T', s.n, s.m, s.k, 1, 0);
#else
        const bool by_cublas = false;
#endif
        std::printf("%-22s %c%c  %9.1f %9.1f %6.2f  %.60s%s\n", name, s.ta, s.tb, 1e3 * t_ours, 1e3 * t_cublas,
                    t_cublas / t_ours, by_cublas ? "cuBLAS" : autotune_kernel_config(kernel), ok ? "" : "  WRONG");
        cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(R);
    }
    if (single)
        std::printf("%dx%dx%d %c%c, leading dimensions %d past the rows: %.3fx cuBLAS; %s\n", given.m, given.n, given.k,
                    given.ta, given.tb, given.pad, std::exp(log_sum), wrong ? "WRONG" : "all ok");
    else
        std::printf("geomean %.3fx cuBLAS over %d shapes (seed %u, %s leading dimensions); %s\n",
                    std::exp(log_sum / count), count, seed, mode.c_str(), wrong ? "SOME WRONG" : "all ok");
    cublasDestroy(handle);
    return wrong ? 1 : 0;
}
