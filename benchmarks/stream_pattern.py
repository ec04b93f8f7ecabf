"""How fast this GPU reads an M x K row-major matrix in the patterns a few-columns kernel can use.

    python benchmarks/stream_pattern.py [--m 4096 --k 4096] [--cases walks] [--out FILE.json]

A few-columns GEMM (C = A @ B with N <= 32) is bound by reading A once. Its blocks each take BM
rows and a chunk of K, and copy A into a ring of shared memory stage by stage: each stage SEG
floats of each of the BM rows (16-byte cp.async copies, consecutive threads along a row). SEG
sets how many contiguous bytes of a row are read at a time (128 B at SEG 32, 1 KB at 256): the
question is whether DRAM delivers short segments of many rows as fast as long ones. Each kernel
here reads A in one such pattern and does nothing else (one value a stage is summed so that the
copies are needed); the grid-stride float4 stream of bandwidth.py is the reference. Input sets
are rotated out of L2 as the runner does, and each time is the median of 30 CUDA-event timings.

--cases walks times the two sides' kernels as copy patterns instead: blocks walking along A's
rows (few columns) or down B's columns (few rows), with a block's pieces consecutive (a chunk of
K) or interleaved with its neighbours'. Run at two K, the difference is the streaming rate with
the fixed cost of a launch taken out.
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

# A block copies BM rows x SEG floats a stage through a ring of STAGES slots (the fewcols A_STAGES
# and warptile A_ROWS copy loops, without the products). WALK 0 (a few-columns kernel reading A
# stored M x K): the block keeps rows [blockIdx.x * BM, +BM) and walks along them, SEG floats a
# stage. WALK 1 (a few-rows kernel reading B stored K x N): it keeps columns [blockIdx.x * SEG,
# +SEG) and walks down, BM rows a stage. A block takes NSEG pieces: with INTERLEAVE 0 consecutive
# ones (blockIdx.y * NSEG + t), with 1 every gridDim.y-th (t * gridDim.y + blockIdx.y), so that the
# blocks of one row group read neighbouring pieces at the same time.
_RING = r"""
static __device__ __forceinline__ void copy_stage(const float* __restrict__ A, int lda, unsigned base, int t) {
    const int piece = INTERLEAVE ? t * (int)gridDim.y + (int)blockIdx.y : (int)blockIdx.y * NSEG + t;
    const int r0 = WALK ? piece * BM : (int)blockIdx.x * BM;
    const int c0 = WALK ? (int)blockIdx.x * SEG : piece * SEG;
    for (int c = threadIdx.x; c < BM * SEG / 4; c += THREADS) {
        const int r = c / (SEG / 4), q = (c % (SEG / 4)) * 4;
        const float* src = A + (size_t)(r0 + r) * lda + c0 + q;
        const unsigned dst = base + 4u * ((t % STAGES) * BM * SEG + r * SEG + q);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) ring_read(const float* __restrict__ A, int lda, float* out) {
    extern __shared__ __align__(16) float ring[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(ring);
    float s = 0.0f;
    for (int t = 0; t < STAGES - 1; ++t) {
        if (t < NSEG) copy_stage(A, lda, base, t);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int ts = 0; ts < NSEG; ++ts) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        __syncthreads();
        const int t = ts + STAGES - 1;
        if (t < NSEG) copy_stage(A, lda, base, t);
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


def _time_ring(case: dict, sets: list, out, K: int) -> dict:
    """case: seg, bm, span (floats of a row a block reads with WALK 0, rows with WALK 1), stages,
    threads, per_sm (1: one block an SM), walk, interleave."""
    c = {"walk": 0, "interleave": 0, **case}
    M = sets[0].shape[0]
    seg, bm, span, walk = c["seg"], c["bm"], c["span"], c["walk"]
    nseg = span // (bm if walk else seg)
    defs = dict(SEG=seg, BM=bm, NSEG=nseg, STAGES=c["stages"], THREADS=c["threads"], WALK=walk)
    defs["INTERLEAVE"] = c["interleave"]
    src = "\n".join(f"#define {k} {v}" for k, v in defs.items())
    kern = cp.RawKernel(src + _RING, "ring_read", options=("-std=c++17",))
    ring = 4 * c["stages"] * bm * seg
    # One block an SM: ask for more than half of the SM's shared memory.
    smem = ring if c["per_sm"] > 1 else max(ring, 120 * 1024)
    kern.max_dynamic_shared_size_bytes = smem
    grid = (K // seg, M // span) if walk else (M // bm, K // span)
    args = (c["threads"],)
    ms = _median_ms(lambda i: kern(grid, args, (sets[i % len(sets)], cp.int32(K), out), shared_mem=smem))
    how = "down the columns" if walk else "along the rows"
    name = (
        f"{how}: SEG {seg:3d} ({4 * seg:4d} B a row), BM {bm:3d}, {'rows' if walk else 'KCHUNK'} {span:5d}, "
        f"{c['stages']} st, {c['threads']} thr, {'interleaved' if c['interleave'] else 'chunks'}"
        f"{', 1/SM max' if c['per_sm'] == 1 else ''}"
    )
    return {"pattern": name, **c, "blocks": grid[0] * grid[1], "us": 1e3 * ms, "gbps": 4 * M * K / (ms * 1e6)}


# Run 169's cases: a stage of 32 KB at every SEG, so only the segment length and the rows a stage
# change; then the fewcols records' shapes of block.
def _segment_cases() -> list[dict]:
    cases = []
    for seg in (32, 64, 128, 256, 512):
        for kchunk in (512, 1024, 4096):
            if kchunk >= 2 * seg:
                cases.append(dict(seg=seg, bm=8192 // seg, span=kchunk, stages=3, threads=256, per_sm=2))
    cases += [
        dict(seg=32, bm=256, span=512, stages=3, threads=512, per_sm=1),
        dict(seg=128, bm=64, span=512, stages=3, threads=256, per_sm=1),
        dict(seg=256, bm=32, span=1024, stages=3, threads=256, per_sm=1),
        dict(seg=128, bm=64, span=4096, stages=4, threads=256, per_sm=2),
    ]
    return cases


# The two sides' kernels as copy patterns: warptile's few-columns records (64 rows, 128 or 256 B
# of each a stage, 2 stages, 64 threads), the few-rows record (16 rows of B's 256 B a stage, 7
# stages, walking down a 1024-row slab) and its mirror along A's rows; each in chunks of K and
# interleaved.
def _walk_cases() -> list[dict]:
    cases = []
    for il in (0, 1):
        cases += [
            dict(seg=32, bm=64, span=256, stages=2, threads=64, per_sm=2, interleave=il),
            dict(seg=64, bm=64, span=512, stages=2, threads=64, per_sm=2, interleave=il),
            dict(seg=64, bm=16, span=1024, stages=7, threads=64, per_sm=2, interleave=il),
            dict(seg=64, bm=16, span=1024, stages=7, threads=64, per_sm=2, walk=1, interleave=il),
            dict(seg=128, bm=32, span=1024, stages=4, threads=128, per_sm=2, interleave=il),
        ]
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument(
        "--cases",
        choices=["segments", "walks"],
        default="segments",
        help="segments: the measured lengths of a row's runs; walks: the two sides' kernels as copy patterns",
    )
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
    print(f"{rows[-1]['pattern']:96s} {rows[-1]['us']:7.1f} us {rows[-1]['gbps']:6.0f} GB/s", flush=True)

    cases = _walk_cases() if args.cases == "walks" else _segment_cases()
    for case in cases:
        span_of = M if case.get("walk") else K
        tile = case["seg"] if case.get("walk") else case["bm"]
        if span_of % case["span"] == 0 and (K if case.get("walk") else M) % tile == 0:
            rows.append(_time_ring(case, sets, out, K))
            r = rows[-1]
            print(f"{r['pattern']:96s} {r['us']:7.1f} us {r['gbps']:6.0f} GB/s  ({r['blocks']} blocks)", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
            json.dump({"gpu": gpu, "M": M, "K": K, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
