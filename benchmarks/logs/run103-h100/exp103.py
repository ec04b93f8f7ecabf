"""Run 103: where DIRECT's time goes at 4096^3 -- A's rounding pass in shared memory (removed,
unrolled) and tensor maps of type TFLOAT32 (does the copy engine round?) -- beside the prepared
seed and cuBLAS TF32 in the same process; error against float64 and bits against the rounded form."""
import json, os, re, sys
os.environ.setdefault("CUPY_TF32", "0")
import cupy as cp
from autotune.space import Family
from autotune.render import render, DEFAULT_KERNEL
from autotune.gpu.compile import compile_source
from autotune.gpu.runner import LoadedKernel
from autotune.gpu import tensor_map

fam = Family.load("wgmma_tf32")
def cfg(BM, BN, STAGES, DIRECT=1, **kw):
    return dict(BM=BM, BN=BN, STAGES=STAGES, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=DIRECT, **kw)
NOROUND = (r"for \(int i = threadIdx.x - 32; i < \d+; i \+= 96\)", "for (int i = threadIdx.x - 32; i < 0; i += 96)")
UNROLL = (r"(\n\s*)(for \(int i = threadIdx.x - 32; i < \d+; i \+= 96\))", r"\1#pragma unroll 4\1\2")
VARIANTS = {
    "prepared_128x256x4": (cfg(128, 256, 4, DIRECT=0), [], 7),
    "direct_256x128x4": (cfg(256, 128, 4), [], 7),
    "direct_256x128x4_unroll4": (cfg(256, 128, 4), [UNROLL], 7),
    "direct_256x128x4_noround": (cfg(256, 128, 4), [NOROUND], 7),
    "direct_256x128x4_noround_tf32map": (cfg(256, 128, 4), [NOROUND], 11),
    "direct_128x192x4": (cfg(128, 192, 4), [], 7),
    "direct_128x192x4_noround_tf32map": (cfg(128, 192, 4), [NOROUND], 11),
}
def main():
    M, N, K = (int(x) for x in sys.argv[1].split("x"))
    layout = sys.argv[2] if len(sys.argv) > 2 else "nn"
    rng = cp.random.default_rng(1)
    A = rng.random((M, K), dtype=cp.float32) * 2 - 1
    B = rng.random((N, K) if layout == "nt" else (K, N), dtype=cp.float32) * 2 - 1
    opB = B.T if layout == "nt" else B
    ref = A.astype(cp.float64) @ opB.astype(cp.float64)
    scale = float(cp.abs(ref).max())
    def timeit(fn, reps=30):
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
    t = timeit(lambda: cp.matmul(A, opB, out=C))
    cublas.setMathMode(h, cublas.CUBLAS_DEFAULT_MATH)
    print(f"{M}x{N}x{K} {layout}: cuBLAS TF32 {flop / t / 1e9:.1f} TFLOP/s err {float(cp.abs(C - ref).max()) / scale:.2e}", flush=True)
    rows.append({"name": "cublas_tf32", "ms": t})
    rounded = None
    for name, (params, edits, dtype) in VARIANTS.items():
        if layout == "nt":
            params = {**params, "TRANS_B": 1}
        r = fam.resolve(params)
        src = render(r)
        for pat, new in edits:
            src, n = re.subn(pat, new, src)
            assert n == 1, (name, pat, n)
        c = compile_source(src, "sm_90a", DEFAULT_KERNEL, use_cache=False)
        tensor_map._FLOAT32 = dtype
        tensor_map.cached._cache.clear()
        k = LoadedKernel(c.cubin, DEFAULT_KERNEL, r.plan)
        C.fill(0)
        k.launch(M, N, K, A, B, C)
        err = float(cp.abs(C - ref).max()) / scale
        med = float(cp.median(cp.abs(C - ref))) / scale
        if name == "direct_256x128x4":
            rounded = C.copy()
        same = bool((C == rounded).all()) if rounded is not None else None
        t = timeit(lambda: k.launch(M, N, K, A, B, C))
        print(f"{name}: {flop / t / 1e9:.1f} TFLOP/s ({t * 1e3:.0f} us) err {err:.2e} median {med:.2e} same bits as direct rounded: {same}; regs {c.resources.registers} spill {c.resources.spill_bytes}", flush=True)
        rows.append({"name": name, "ms": t, "err": err, "median": med, "same_as_rounded": same, "regs": c.resources.registers})
    json.dump(rows, open(os.environ.get("OUT", ".") + f"/logs/exp103_{M}x{N}x{K}_{layout}.json", "w"), indent=1)

if __name__ == "__main__":
    main()
