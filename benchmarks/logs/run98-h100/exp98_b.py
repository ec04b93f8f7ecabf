"""Run 98: where the direct medium kernel's time goes -- one edit at a time to its rendered
source, timed at 4096^3 beside cuBLAS TF32 and the prepared seed in the same process."""
import json, os, sys
os.environ.setdefault("CUPY_TF32", "0")
import cupy as cp
from autotune.space import Family
from autotune.render import render, DEFAULT_KERNEL
from autotune.gpu.compile import compile_source
from autotune.gpu.runner import LoadedKernel

fam = Family.load("wgmma_tf32")
DIRECT = dict(BM=256, BN=128, STAGES=4, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=1)
PREP = dict(BM=128, BN=256, STAGES=4, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=0)
FENCE = 'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");'
ROUND = "v.x = at_tf32(v.x); v.y = at_tf32(v.y); v.z = at_tf32(v.z); v.w = at_tf32(v.w);"
import re
COPY_A = "at_copy4(st + 4 * (unsigned)at_tile_at(0, 256, r, q), n > 0 ? A + at_ia(row, k, lda) : A, n, vec);"
COPY_B = "at_copy4(st + 32768 + 4 * (kr * 136 + 4 * c4), n > 0 ? B + at_ib(k, col, ldb) : B, n, vec);"
MMA = "at_wgmma_rs(acc, f, kk, at_desc(a_tile + 32 * kk), 1);"
NOROUND = [(ROUND, ""), ("*p = v;", "")]
VARIANTS = {
    "base": (DIRECT, []),
    "consumer_only": (DIRECT, NOROUND + [(COPY_A, ""), (COPY_B, "")]),
    "producer_only": (DIRECT, [(MMA, "")]),
    "producer_only_no_round": (DIRECT, NOROUND + [(MMA, "")]),
    "unroll": (DIRECT, [("#pragma unroll 1\n", "#pragma unroll\n")]),
    "copies_only_A": (DIRECT, NOROUND + [(COPY_B, ""), (MMA, "")]),
    "copies_only_B": (DIRECT, NOROUND + [(COPY_A, ""), (MMA, "")]),
    "prepared_seed": (PREP, []),
}
M = N = K = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
rng = cp.random.default_rng(1)
A = rng.random((M, K), dtype=cp.float32) * 2 - 1
B = rng.random((K, N), dtype=cp.float32) * 2 - 1
ref = A.astype(cp.float64) @ B.astype(cp.float64)
scale = float(cp.abs(ref).max())
def timeit(fn, reps=20):
    fn(); cp.cuda.Device().synchronize()
    ev = [cp.cuda.Event() for _ in range(2 * reps)]
    for i in range(reps):
        ev[2 * i].record(); fn(); ev[2 * i + 1].record()
    ev[-1].synchronize()
    ts = sorted(cp.cuda.get_elapsed_time(ev[2 * i], ev[2 * i + 1]) for i in range(reps))
    return ts[len(ts) // 2]
flop = 2.0 * M * N * K
rows = []
C = cp.empty((M, N), cp.float32)
from cupy.cuda import cublas
h = cp.cuda.device.get_cublas_handle()
cublas.setMathMode(h, getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3))
t = timeit(lambda: cp.matmul(A, B, out=C))
cublas.setMathMode(h, cublas.CUBLAS_DEFAULT_MATH)
print(f"cuBLAS TF32 {flop / t / 1e9:.1f} TFLOP/s err {float(cp.abs(C - ref).max()) / scale:.2e}", flush=True)
rows.append({"name": "cublas_tf32", "ms": t})
for name, (params, edits) in VARIANTS.items():
    r = fam.resolve(params)
    src = render(r)
    for old, new in edits:
        assert old in src, (name, old)
        src = src.replace(old, new)
    c = compile_source(src, "sm_90a", DEFAULT_KERNEL, use_cache=False)
    k = LoadedKernel(c.cubin, DEFAULT_KERNEL, r.plan)
    C.fill(0)
    k.launch(M, N, K, A, B, C)
    err = float(cp.abs(C - ref).max()) / scale
    t = timeit(lambda: k.launch(M, N, K, A, B, C))
    print(f"{name}: {flop / t / 1e9:.1f} TFLOP/s ({t * 1e3:.0f} us) err {err:.2e} regs {c.resources.registers} spill {c.resources.spill_bytes}", flush=True)
    rows.append({"name": name, "ms": t, "err": err, "regs": c.resources.registers})
    if name == "base" and os.environ.get("SAVE_SRC"):
        open(os.environ["SAVE_SRC"], "w").write(src)
json.dump(rows, open(os.environ.get("OUT", ".") + "/logs/exp98.json", "w"), indent=1)
