"""A prototype few-columns kernel with the 1-column kernel's read of A, timed before it is a family.

    python benchmarks/along_k_proto.py [--m 4096 --k 4096] [--out FILE.json]

C (M x NR) = A (M x K, row-major) @ B (K x NR, row-major), NR 8 or 16, M and K multiples of the
tiles (a prototype: no tails, no other layouts). The read of A is the matrix-vector one that
reaches 27.7 us at 4096x1x4096 (fewcols, lanes along K): each warp takes RPW rows and its 32
lanes read them along K, 512 contiguous bytes a row per 16-byte load, loads of the next stage in
registers while this one's products are computed. What the 1-column kernel does not need is B:
here every block streams op(B)'s rows (128 x S of them a stage, NR floats each, contiguous in
memory) through a ring of STAGES slots by cp.async, and each lane reads its four rows of a stage
(k = 4 lane + t) as float4s along the columns; the ring pads 4 floats after every 4 rows so that
a quarter warp's reads fall on distinct banks. The lanes' sums meet by shuffles once per block,
at the end (KSPLIT 1: all of K in one block; more: that many blocks along K, adding by atomics
into C zeroed first, the zeroing timed with it).

Each case is checked against float64 and timed by the runner that times a search's candidates
(its input sets rotated out of L2, launches queued behind a spin kernel, CUDA events, the
median), beside cuBLAS timed by the same runner.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.gpu.runner import Runner

_KERNEL = r"""
#define BROWS (128 * S)
#define GROUP (4 * NR + 4)  // floats of 4 rows of B in the ring, padded
#define BSTAGE (BROWS / 4 * GROUP)
#define THREADS (32 * W)

template <int V> struct ic { static constexpr int value = V; };

extern "C" __global__ void __launch_bounds__(THREADS) along_k(int M, int K, const float* __restrict__ A,
                                                              const float* __restrict__ B, float* __restrict__ C) {
    extern __shared__ __align__(16) float Bs[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(Bs);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int m0 = blockIdx.x * (W * RPW) + warp * RPW;
    const int kc = K / KSPLIT, kb = blockIdx.y * kc;
    const int nst = kc / BROWS;
    auto copy_b = [&](int st) {
        const float* src = B + (size_t)(kb + st * BROWS) * NR;
        const unsigned dst = base + 4u * (unsigned)((st % STAGES) * BSTAGE);
        for (int c = threadIdx.x; c < BROWS * NR / 4; c += THREADS) {
            const int r = c / (NR / 4), q = c % (NR / 4);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                         :: "r"(dst + 4u * (unsigned)((r >> 2) * GROUP + (r & 3) * NR + 4 * q)), "l"(src + 4 * c));
        }
    };
    const float* arow[RPW];
#pragma unroll
    for (int i = 0; i < RPW; ++i) arow[i] = A + (size_t)(m0 + i) * K + kb + 4 * lane;
    float4 a[2][S][RPW];
    float acc[RPW][NR];
#pragma unroll
    for (int i = 0; i < RPW; ++i)
#pragma unroll
        for (int j = 0; j < NR; ++j) acc[i][j] = 0.0f;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nst) copy_b(s);
        asm volatile("cp.async.commit_group;\n" ::);
    }
#pragma unroll
    for (int u = 0; u < S; ++u)
#pragma unroll
        for (int i = 0; i < RPW; ++i) a[0][u][i] = __ldcs(reinterpret_cast<const float4*>(arow[i] + 128 * u));
    auto step = [&](auto cur, int st) {
        constexpr int CUR = decltype(cur)::value, NXT = 1 - CUR;
        if (st + 1 < nst) {
#pragma unroll
            for (int u = 0; u < S; ++u)
#pragma unroll
                for (int i = 0; i < RPW; ++i)
                    a[NXT][u][i] = __ldcs(reinterpret_cast<const float4*>(arow[i] + (st + 1) * BROWS + 128 * u));
        }
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        __syncthreads();
        if (st + STAGES - 1 < nst) copy_b(st + STAGES - 1);
        asm volatile("cp.async.commit_group;\n" ::);
        const float* bs = Bs + (st % STAGES) * BSTAGE;
#pragma unroll
        for (int u = 0; u < S; ++u)
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const float* brow = bs + (u * 32 + lane) * GROUP + t * NR;
#pragma unroll
                for (int j = 0; j < NR; j += 4) {
                    const float4 b = *reinterpret_cast<const float4*>(brow + j);
#pragma unroll
                    for (int i = 0; i < RPW; ++i) {
                        const float4 q = a[CUR][u][i];
                        const float av = t == 0 ? q.x : t == 1 ? q.y : t == 2 ? q.z : q.w;
                        acc[i][j + 0] = fmaf(av, b.x, acc[i][j + 0]);
                        acc[i][j + 1] = fmaf(av, b.y, acc[i][j + 1]);
                        acc[i][j + 2] = fmaf(av, b.z, acc[i][j + 2]);
                        acc[i][j + 3] = fmaf(av, b.w, acc[i][j + 3]);
                    }
                }
            }
    };
    for (int st = 0; st < nst; st += 2) {
        step(ic<0>{}, st);
        if (st + 1 < nst) step(ic<1>{}, st + 1);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int i = 0; i < RPW; ++i)
#pragma unroll
            for (int j = 0; j < NR; ++j) acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], off);
#pragma unroll
    for (int i = 0; i < RPW; ++i)
#pragma unroll
        for (int j = 0; j < NR; ++j) {
            if ((i * NR + j) % 32 != lane) continue;
            float* c = C + (size_t)(m0 + i) * NR + j;
            if (KSPLIT > 1) atomicAdd(c, acc[i][j]);
            else *c = acc[i][j];
        }
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--out", help="also write the rows as JSON here")
    args = ap.parse_args()
    M, K = args.m, args.k
    runner = Runner(0)
    rows = []
    for nr in (8, 16):
        runner.setup(M, nr, K)
        cb = runner.cublas()
        nbytes = 4 * (M * K + K * nr + M * nr)
        print(f"{'cuBLAS ' + cb['path'] + f' NR {nr}':64s} {1e3 * cb['time_ms']:6.1f} us", flush=True)
        rows.append({"case": f"cuBLAS NR {nr}", "nr": nr, "us": 1e3 * cb["time_ms"], "path": cb["path"]})
        a0, b0, c0 = runner.sets[0]
        ref = a0.astype(cp.float64) @ b0.astype(cp.float64)
        # (RPW, W, S, STAGES, KSPLIT)
        for rpw, w, s, stages, ksplit in [
            (4, 8, 1, 3, 1), (4, 8, 2, 3, 1), (4, 8, 4, 2, 1), (4, 8, 2, 4, 1), (2, 8, 2, 3, 1), (4, 4, 2, 3, 1),
            (4, 4, 4, 3, 1), (2, 4, 4, 3, 1), (2, 8, 4, 3, 1), (8, 4, 2, 3, 1), (4, 8, 2, 3, 2), (2, 8, 2, 3, 2),
            (4, 4, 2, 3, 2), (2, 8, 4, 2, 2),
        ]:  # fmt: skip
            if M % (rpw * w) or K % (ksplit * 128 * s):
                continue
            defs = dict(NR=nr, RPW=rpw, W=w, S=s, STAGES=stages, KSPLIT=ksplit)
            src = "\n".join(f"#define {k} {v}" for k, v in defs.items()) + _KERNEL
            kern = cp.RawKernel(src, "along_k", options=("-std=c++17",))
            smem = 4 * stages * (128 * s // 4) * (4 * nr + 4)
            kern.max_dynamic_shared_size_bytes = smem
            grid, block = (M // (rpw * w), ksplit), (32 * w,)

            def launch(a, b, c, alpha=1.0, beta=0.0, kern=kern, grid=grid, block=block, smem=smem, ksplit=ksplit):
                if ksplit > 1:
                    c.fill(0)
                kern(grid, block, (cp.int32(M), cp.int32(K), a, b, c), shared_mem=smem)

            launch(a0, b0, c0)
            err = float(cp.abs(c0 - ref).max() / cp.abs(ref).max())
            t = runner.time(launch)
            name = f"NR {nr} RPW {rpw} W {w} S {s} STAGES {stages} KSPLIT {ksplit} ({kern.num_regs} regs)"
            row = {"case": name, **defs, "regs": kern.num_regs, "err": err, "us": 1e3 * t["time_ms"]}
            row |= {"gbps": nbytes / (t["time_ms"] * 1e6), "x_cublas": cb["time_ms"] / t["time_ms"]}
            rows.append(row)
            print(f"{name:64s} {row['us']:6.1f} us {row['gbps']:6.0f} GB/s  {row['x_cublas']:.3f}x  err {err:.1e}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": runner.info["name"], "M": M, "K": K, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
