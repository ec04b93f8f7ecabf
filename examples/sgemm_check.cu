// A standalone program that uses an exported autotune header and checks it against cuBLAS.
//
//   autotune export --size 4096 --layout nt --gpu nvidia-h100-80gb-hbm3 -o tuned_sgemm.h
//   nvcc -arch=sm_90 -O2 -I. examples/sgemm_check.cu -lcublas -o sgemm_check
//   ./sgemm_check            # default shapes, or: ./sgemm_check M N K [M N K ...]
//
// Each shape is run through the header's three entry points -- cuBLAS's column-major
// convention with leading dimensions larger than the rows, the row-major one, and the
// contiguous one -- and compared with cublasSgemm on the same data (alpha = 1.5, beta = -0.5).
// A header of several layouts (autotune export --layouts nn,nt,...) is run through cuBLAS's
// convention once per layout it holds.
// It also checks that bad arguments return cudaErrorInvalidValue and leave C untouched, and runs
// the strided batched entry point (three matrices with gaps between them, then one B shared by
// all of them, stride 0) against cublasSgemmStridedBatched.
// Exit status 0 when every result is within 1e-4 relative (Frobenius) of cuBLAS's.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "tuned_sgemm.h"

#define CHECK_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(2); } } while (0)
#define CHECK_CUBLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    std::fprintf(stderr, "%s:%d: cuBLAS status %d\n", __FILE__, __LINE__, (int)s_); std::exit(2); } } while (0)

static std::vector<float> random_floats(size_t n, unsigned seed)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)((seed >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
    return v;
}

static double rel_diff(const std::vector<float>& x, const std::vector<float>& ref)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = (double)x[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct Case {
    int m, n, k;
};

// A and B copied from the host, C (the header's result) and R (cuBLAS's) on the device; freed
// at the end of the scope.
struct Operands {
    float *A = nullptr, *B = nullptr, *C = nullptr, *R = nullptr;
    Operands(const std::vector<float>& ha, const std::vector<float>& hb, size_t c_n)
    {
        CHECK_CUDA(cudaMalloc(&A, ha.size() * 4)); CHECK_CUDA(cudaMalloc(&B, hb.size() * 4));
        CHECK_CUDA(cudaMalloc(&C, c_n * 4)); CHECK_CUDA(cudaMalloc(&R, c_n * 4));
        CHECK_CUDA(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
    }
    ~Operands() { cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(R); }
    Operands(const Operands&) = delete;
    Operands& operator=(const Operands&) = delete;
};

// cuBLAS's transposes each layout of the header serves: a row-major A @ B.T (nt) kernel is
// cuBLAS's ('T', 'N'). A header of several layouts (export --layouts) names them AUTOTUNE_HAS_*.
struct Trans {
    char ta, tb;
};
#ifdef AUTOTUNE_LAYOUTS
static const Trans kTrans[] = {
#ifdef AUTOTUNE_HAS_NN
    {'N', 'N'},
#endif
#ifdef AUTOTUNE_HAS_NT
    {'T', 'N'},
#endif
#ifdef AUTOTUNE_HAS_TN
    {'N', 'T'},
#endif
#ifdef AUTOTUNE_HAS_TT
    {'T', 'T'},
#endif
};
#else
static const Trans kTrans[] = {{AUTOTUNE_TRANS_B ? 'T' : 'N', AUTOTUNE_TRANS_A ? 'T' : 'N'}};
#endif

static bool run_case(cublasHandle_t handle, Case c, Trans t)
{
    const char ta = t.ta, tb = t.tb;
    const int a_rows = ta == 'N' ? c.m : c.k, a_cols = ta == 'N' ? c.k : c.m;  // column-major A
    const int b_rows = tb == 'N' ? c.k : c.n, b_cols = tb == 'N' ? c.n : c.k;  // column-major B
    const int lda = a_rows + 3, ldb = b_rows + 5, ldc = c.m + 1;  // padded, not multiples of 4
    const size_t a_n = (size_t)lda * a_cols, b_n = (size_t)ldb * b_cols, c_n = (size_t)ldc * c.n;
    const std::vector<float> ha = random_floats(a_n, 1), hb = random_floats(b_n, 2), hc = random_floats(c_n, 3);
    const Operands d(ha, hb, c_n);
    float *const A = d.A, *const B = d.B, *const C = d.C, *const R = d.R;
    const float alpha = 1.5f, beta = -0.5f;
    CHECK_CUDA(cudaMemcpy(R, hc.data(), c_n * 4, cudaMemcpyHostToDevice));
    CHECK_CUBLAS(cublasSgemm(handle, ta == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, tb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T,
                             c.m, c.n, c.k, &alpha, A, lda, B, ldb, &beta, R, ldc));
    std::vector<float> ref(c_n), got(c_n);
    CHECK_CUDA(cudaMemcpy(ref.data(), R, c_n * 4, cudaMemcpyDeviceToHost));
    bool ok = true;

    // 1. cuBLAS's convention, padded leading dimensions.
    CHECK_CUDA(cudaMemcpy(C, hc.data(), c_n * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(autotune_sgemm(ta, tb, c.m, c.n, c.k, alpha, A, lda, B, ldb, beta, C, ldc, 0));
    CHECK_CUDA(cudaMemcpy(got.data(), C, c_n * 4, cudaMemcpyDeviceToHost));
    const double e1 = rel_diff(got, ref);
    ok = ok && e1 <= 1e-4;

    // 2. The row-major entry point on the same memory: column-major C (m x n) is row-major C^T.
    // (A header of several layouts has one per layout, in its namespace: not called here.)
    double e2 = 0.0;
#ifndef AUTOTUNE_LAYOUTS
    CHECK_CUDA(cudaMemcpy(C, hc.data(), c_n * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(autotune_sgemm_row_major(c.n, c.m, c.k, alpha, B, ldb, A, lda, beta, C, ldc, 0));
    CHECK_CUDA(cudaMemcpy(got.data(), C, c_n * 4, cudaMemcpyDeviceToHost));
    e2 = rel_diff(got, ref);
    ok = ok && e2 <= 1e-4;
#endif

    // 3. Bad arguments: nothing runs, C is left as it was.
    const cudaError_t bad[] = {
        autotune_sgemm(ta, tb, c.m, c.n, c.k, alpha, A, a_rows - 1, B, ldb, beta, C, ldc, 0),
        autotune_sgemm(ta, tb, c.m, c.n, c.k, alpha, A, lda, B, ldb, beta, C, c.m - 1, 0),
        autotune_sgemm(ta, tb, -1, c.n, c.k, alpha, A, lda, B, ldb, beta, C, ldc, 0),
#ifndef AUTOTUNE_LAYOUTS  // another layout's transposes (a header of several may hold it)
        autotune_sgemm(ta == 'N' ? 'T' : 'N', tb, c.m, c.n, c.k, alpha, A, lda, B, ldb, beta, C, ldc, 0),
#endif
        autotune_sgemm('X', tb, c.m, c.n, c.k, alpha, A, lda, B, ldb, beta, C, ldc, 0),
        autotune_sgemm(ta, tb, c.m, c.n, c.k, alpha, A, lda, B, ldb, beta, A, ldc, 0),  // C overlaps A
    };
    std::vector<float> after(c_n);
    CHECK_CUDA(cudaMemcpy(after.data(), C, c_n * 4, cudaMemcpyDeviceToHost));
    bool refused = true;
    for (cudaError_t e : bad) refused = refused && e == cudaErrorInvalidValue;
    ok = ok && refused && after == got;
    (void)cudaGetLastError();

    std::printf("%6d x %6d x %6d  %c%c  lda %d ldb %d ldc %d  cublas-convention %.2e  row-major %.2e  bad args %s  %s\n",
                c.m, c.n, c.k, ta, tb, lda, ldb, ldc, e1, e2, refused ? "refused" : "NOT REFUSED", ok ? "ok" : "FAIL");
    return ok;
}

#ifndef AUTOTUNE_LAYOUTS
// The contiguous row-major entry point against cuBLAS on the transposed problem.
static bool run_contiguous(cublasHandle_t handle, Case c)
{
    const size_t a_n = (size_t)c.m * c.k, b_n = (size_t)c.k * c.n, c_n = (size_t)c.m * c.n;
    const std::vector<float> ha = random_floats(a_n, 4), hb = random_floats(b_n, 5);
    const Operands d(ha, hb, c_n);
    float *const A = d.A, *const B = d.B, *const C = d.C, *const R = d.R;
    const float one = 1.0f, zero = 0.0f;
    CHECK_CUDA(autotune_sgemm(c.m, c.n, c.k, one, A, B, zero, C, 0));
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    const int lda = AUTOTUNE_TRANS_A ? c.m : c.k, ldb = AUTOTUNE_TRANS_B ? c.k : c.n;
    CHECK_CUBLAS(cublasSgemm(handle, AUTOTUNE_TRANS_B ? CUBLAS_OP_T : CUBLAS_OP_N, AUTOTUNE_TRANS_A ? CUBLAS_OP_T : CUBLAS_OP_N,
                             c.n, c.m, c.k, &one, B, ldb, A, lda, &zero, R, c.n));
    std::vector<float> got(c_n), ref(c_n);
    CHECK_CUDA(cudaMemcpy(got.data(), C, c_n * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(ref.data(), R, c_n * 4, cudaMemcpyDeviceToHost));
    const double e = rel_diff(got, ref);
    std::printf("%6d x %6d x %6d  contiguous row-major %.2e  %s\n", c.m, c.n, c.k, e, e <= 1e-4 ? "ok" : "FAIL");
    return e <= 1e-4;
}
#endif

// autotune_sgemm_strided_batched against cublasSgemmStridedBatched: padded leading dimensions,
// strides a little longer than a matrix, and B broadcast (stride 0).
static bool run_batched(cublasHandle_t handle, Case c, int batch, Trans t)
{
    const char ta = t.ta, tb = t.tb;
    const cublasOperation_t opa = ta == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, opb = tb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
    const int a_rows = ta == 'N' ? c.m : c.k, a_cols = ta == 'N' ? c.k : c.m;
    const int b_rows = tb == 'N' ? c.k : c.n, b_cols = tb == 'N' ? c.n : c.k;
    const int lda = a_rows + 1, ldb = b_rows + 2, ldc = c.m + 3;
    const long long sa = (long long)lda * a_cols + 5, sb = (long long)ldb * b_cols + 7, sc = (long long)ldc * c.n + 9;
    const size_t a_n = (size_t)sa * batch, b_n = (size_t)sb * batch, c_n = (size_t)sc * batch;
    const std::vector<float> ha = random_floats(a_n, 6), hb = random_floats(b_n, 7), hc = random_floats(c_n, 8);
    const Operands d(ha, hb, c_n);
    float *const A = d.A, *const B = d.B, *const C = d.C, *const R = d.R;
    const float alpha = 0.75f, beta = 0.25f;
    bool ok = true;
    double worst = 0.0;
    for (long long strideB : {sb, 0LL}) {
        CHECK_CUDA(cudaMemcpy(R, hc.data(), c_n * 4, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(C, hc.data(), c_n * 4, cudaMemcpyHostToDevice));
        CHECK_CUBLAS(cublasSgemmStridedBatched(handle, opa, opb, c.m, c.n, c.k, &alpha, A, lda, sa, B, ldb, strideB,
                                               &beta, R, ldc, sc, batch));
        CHECK_CUDA(autotune_sgemm_strided_batched(ta, tb, c.m, c.n, c.k, alpha, A, lda, sa, B, ldb, strideB, beta, C, ldc,
                                                  sc, batch, 0));
        std::vector<float> got(c_n), ref(c_n);
        CHECK_CUDA(cudaMemcpy(got.data(), C, c_n * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(ref.data(), R, c_n * 4, cudaMemcpyDeviceToHost));
        const double e = rel_diff(got, ref);  // the gaps between C's matrices too: untouched by both
        worst = e > worst ? e : worst;
        ok = ok && e <= 1e-4;
    }
    std::printf("%6d x %6d x %6d  %c%c  batch %d strided (and B broadcast) %.2e  %s\n", c.m, c.n, c.k, ta, tb, batch,
                worst, ok ? "ok" : "FAIL");
    return ok;
}

int main(int argc, char** argv)
{
    std::vector<Case> cases;
    for (int i = 1; i + 2 < argc; i += 3) cases.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1]), std::atoi(argv[i + 2])});
    if (cases.empty()) cases = {{1, 1, 1}, {7, 13, 5}, {127, 129, 131}, {1000, 1000, 1000}, {1, 4096, 64}, {4096, 3, 257}};
    cublasHandle_t handle;
    CHECK_CUBLAS(cublasCreate(&handle));
    CHECK_CUBLAS(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH));  // strict FP32, no TF32
#ifdef AUTOTUNE_LAYOUTS
    std::printf("%s: layouts %s\n", argv[0], AUTOTUNE_LAYOUTS);
#else
    std::printf("%s: %s (AUTOTUNE_TRANS_A %d, AUTOTUNE_TRANS_B %d)\n", argv[0], AUTOTUNE_FAMILY, AUTOTUNE_TRANS_A, AUTOTUNE_TRANS_B);
#endif
    bool ok = true;
    for (const Case& c : cases) {
        if (c.m < 1 || c.n < 1 || c.k < 1) { std::fprintf(stderr, "sizes must be >= 1\n"); return 2; }
        for (const Trans& t : kTrans) {
            ok = run_case(handle, c, t) && ok;
            ok = run_batched(handle, c, 3, t) && ok;
        }
#ifndef AUTOTUNE_LAYOUTS
        ok = run_contiguous(handle, c) && ok;
#endif
    }
    cublasDestroy(handle);
    std::printf("%s\n", ok ? "all ok" : "FAILED");
    return ok ? 0 : 1;
}
