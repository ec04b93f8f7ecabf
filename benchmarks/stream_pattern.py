"""How fast this GPU reads an M x K row-major matrix in the patterns a few-columns kernel can use.

    python benchmarks/stream_pattern.py [--m 4096 --k 4096] [--out FILE.json]

A few-columns GEMM (C = A @ B with N <= 32) is bound by reading A once. Its blocks each take BM
rows and a chunk of K, and copy A into a ring of shared memory stage by stage: each stage SEG
floats of each of the BM rows (16-byte cp.async copies, consecutive threads along a row). SEG
sets how many contiguous bytes of a row are read at a time (128 B at SEG 32, 1 KB at 256): the
question is whether DRAM delivers short segments of many rows as fast as long ones. Each kernel
here reads A in one such pattern and does nothing else (one value a stage is summed so that the
copies are needed); the grid-stride float4 stream of bandwidth.py is the reference. Input sets
are rotated out of L2 as the runner does, and each time is the median of 30 CUDA-event timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bandwidth import _READ as _STREAM  # the reference: the grid-stride float4 stream

# A block reads rows [blockIdx.x * BM, +BM) and k in [blockIdx.y * KCHUNK, +KCHUNK), SEG floats of
# each row a stage, through a ring of STAGES slots (the fewcols A_STAGES copy loop, without B).
_RING = r"""
// Stage t of the block's rows into ring slot t % STAGES: 16-byte copies, consecutive threads along a row.
static __device__ __forceinline__ void copy_stage(
    const float* __restrict__ A, int lda, unsigned base, int mb, int k0, int t) {
    for (int c = threadIdx.x; c < BM * SEG / 4; c += THREADS) {
        const int r = c / (SEG / 4), q = (c % (SEG / 4)) * 4;
        const float* src = A + (size_t)(mb + r) * lda + k0 + t * SEG + q;
        const unsigned dst = base + 4u * ((t % STAGES) * BM * SEG + r * SEG + q);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) ring_read(const float* __restrict__ A, int lda, float* out) {
    extern __shared__ __align__(16) float ring[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(ring);
    const int mb = blockIdx.x * BM, k0 = blockIdx.y * KCHUNK;
    const int nst = KCHUNK / SEG;
    float s = 0.0f;
    for (int t = 0; t < STAGES - 1; ++t) {
        if (t < nst) {
            copy_stage(A, lda, base, mb, k0, t);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int ts = 0; ts < nst; ++ts) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        __syncthreads();
        const int t = ts + STAGES - 1;
        if (t < nst) {
            copy_stage(A, lda, base, mb, k0, t);
        }
        asm volatile("cp.async.commit_group;\n" ::);
        s += ring[(ts % STAGES) * BM * SEG + threadIdx.x];
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    if (s == 1234.5f) *out = s;
}
"""


def _median_ms(fn, reps: int = 30) -> float:
    fn(0)
    times = []
    for i in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn(i + 1)
        e1.record()
        e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1))
    return statistics.median(times)


def _time_ring(case: tuple, sets: list, out, K: int) -> dict:
    seg, bm, kchunk, stages, threads, per_sm = case
    M = sets[0].shape[0]
    defs = dict(SEG=seg, BM=bm, KCHUNK=kchunk, STAGES=stages, THREADS=threads)
    src = "\n".join(f"#define {k} {v}" for k, v in defs.items())
    kern = cp.RawKernel(src + _RING, "ring_read", options=("-std=c++17",))
    ring = 4 * stages * bm * seg
    # One block an SM: ask for more than half of the SM's shared memory.
    smem = ring if per_sm > 1 else max(ring, 120 * 1024)
    kern.max_dynamic_shared_size_bytes = smem
    grid = (M // bm, K // kchunk)
    ms = _median_ms(lambda i: kern(grid, (threads,), (sets[i % len(sets)], cp.int32(K), out), shared_mem=smem))
    name = f"SEG {seg:3d} ({4 * seg:4d} B a row), BM {bm:3d}, KCHUNK {kchunk:4d}, {stages} st, {per_sm}/SM max"
    return {
        "pattern": name,
        **{k.lower(): v for k, v in defs.items()},
        "one_per_sm": per_sm == 1,
        "blocks": grid[0] * grid[1],
        "us": 1e3 * ms,
        "gbps": 4 * M * K / (ms * 1e6),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--out", help="also write the rows as JSON here")
    args = ap.parse_args()
    M, K = args.m, args.k
    dev = cp.cuda.Device()
    l2 = dev.attributes["L2CacheSize"]
    sms = dev.attributes["MultiProcessorCount"]
    n_sets = max(2, -(-3 * l2 // (4 * M * K)))
    sets = [cp.zeros((M, K), cp.float32) for _ in range(n_sets)]
    out = cp.zeros(1, cp.float32)
    nbytes = 4 * M * K
    rows = []

    stream = cp.RawKernel(_STREAM, "read_sum")
    ms = _median_ms(lambda i: stream((sms * 8,), (256,), (sets[i % n_sets], cp.uint64(M * K // 4), out)))
    rows.append({"pattern": "grid-stride float4 stream", "us": 1e3 * ms, "gbps": nbytes / (ms * 1e6)})
    print(f"{rows[-1]['pattern']:58s} {rows[-1]['us']:7.1f} us {rows[-1]['gbps']:6.0f} GB/s", flush=True)

    # (SEG, BM, KCHUNK, STAGES, THREADS, blocks an SM): a stage of 32 KB at every SEG, so only
    # the segment length and the rows a stage change; then the fewcols records' shapes of block.
    cases = []
    for seg in (32, 64, 128, 256, 512):
        for kchunk in (512, 1024, 4096):
            if kchunk >= 2 * seg:
                cases.append((seg, 8192 // seg, kchunk, 3, 256, 2))
    cases += [(32, 256, 512, 3, 512, 1), (128, 64, 512, 3, 256, 1), (256, 32, 1024, 3, 256, 1)]
    cases += [(128, 64, 4096, 4, 256, 2)]
    for case in cases:
        if M % case[1] == 0 and K % case[2] == 0:
            rows.append(_time_ring(case, sets, out, K))
            r = rows[-1]
            print(f"{r['pattern']:58s} {r['us']:7.1f} us {r['gbps']:6.0f} GB/s  ({r['blocks']} blocks)", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
            json.dump({"gpu": gpu, "M": M, "K": K, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
