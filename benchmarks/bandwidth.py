"""The memory system's reference figures on this GPU, for judging memory-bound GEMMs.

    python benchmarks/bandwidth.py [--mib 1024]

Device-to-device copy (bytes read + bytes written per second, cupy.copyto) and a read-only
stream (a float4 sum kernel: bytes read per second), each the median of 20 CUDA-event timed
runs over buffers far larger than L2. A GEMM whose time is bound by reading an operand once is
compared with these (sweep.py reports each shape's effective GB/s: 4 (MK + KN + MN) / time).
"""

from __future__ import annotations

import argparse
import json
import statistics

import cupy as cp

_READ = r"""
extern "C" __global__ void read_sum(const float4* __restrict__ x, size_t n4, float* out) {
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        const float4 v = __ldcs(x + i);
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1234.5f) *out = s;  // never true for the zeros read here; keeps the loads alive
}
"""


def _median_ms(fn, reps: int = 20) -> float:
    fn()
    times = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="buffer size in MiB")
    args = ap.parse_args()
    n = args.mib * 2**20 // 4
    src, dst, out = cp.zeros(n, cp.float32), cp.empty(n, cp.float32), cp.zeros(1, cp.float32)
    copy_ms = _median_ms(lambda: cp.copyto(dst, src))
    kernel = cp.RawKernel(_READ, "read_sum")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    read_ms = _median_ms(lambda: kernel((sms * 8,), (256,), (src, cp.uint64(n // 4), out)))
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    result = {
        "gpu": name,
        "bytes": 4 * n,
        "copy_gbps": 2 * 4 * n / (copy_ms * 1e6),
        "read_gbps": 4 * n / (read_ms * 1e6),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
