"""Run 99: the medium kernel reading A in place (DIRECT=1) against the prepared one, at a shape
given as N or MxNxK, beside cuBLAS TF32 in the same process; same bits checked."""
import json, os, sys
os.environ.setdefault("CUPY_TF32", "0")
import cupy as cp
from autotune.space import Family
from autotune.render import render, DEFAULT_KERNEL
from autotune.gpu.compile import compile_source
from autotune.gpu.runner import LoadedKernel

fam = Family.load("wgmma_tf32")
def cfg(BM, BN, STAGES, ACC="tc", DIRECT=1):
    return dict(BM=BM, BN=BN, STAGES=STAGES, GROUP_M=8, PRECISION="medium", ACC=ACC, DIRECT=DIRECT)
VARIANTS = {
    "prepared_128x256x4": (cfg(128, 256, 4, DIRECT=0), []),
    "direct_128x256x4": (cfg(128, 256, 4), []),
    "direct_128x256x3": (cfg(128, 256, 3), []),
    "direct_128x128x4": (cfg(128, 128, 4), []),
    "direct_192x128x4": (cfg(192, 128, 4), []),
    "direct_128x192x4": (cfg(128, 192, 4), []),
    "direct_128x128x4_fp32": (cfg(128, 128, 4, ACC="fp32"), []),
}
M, N, K = (list(map(int, sys.argv[1].split("x"))) * 3)[:3] if "x" not in sys.argv[1] else map(int, sys.argv[1].split("x"))
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
    same = bool((C == prev).all()) if name.startswith("direct_128x256x4") else None
    if name.startswith("prepared"):
        prev = C.copy()
    print(f"{name}: same bits as prepared {same}; {flop / t / 1e9:.1f} TFLOP/s ({t * 1e3:.0f} us) err {err:.2e} regs {c.resources.registers} spill {c.resources.spill_bytes}", flush=True)
    rows.append({"name": name, "ms": t, "err": err, "regs": c.resources.registers})
    if name == "base" and os.environ.get("SAVE_SRC"):
        open(os.environ["SAVE_SRC"], "w").write(src)
json.dump(rows, open(os.environ.get("OUT", ".") + f"/logs/exp99_{M}x{N}x{K}.json", "w"), indent=1)
