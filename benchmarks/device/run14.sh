#!/usr/bin/env bash
# Device run 14 (H100): autotune vs Kernel Tuner with a cold compile cache for autotune, after
# the nonce-kernel fix (runs 12-13: NVRTC serves PTX it assembled before from a cache, with
# an empty log, so no ptxas report).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
python3 - > $L/nvrtc_recompile.txt 2>&1 <<'PY'
from cupy_backends.cuda.libs import nvrtc
src = 'extern "C" __global__ void k(float* a){ a[threadIdx.x] *= 2.f; }'
for i in range(3):
    p = nvrtc.createProgram(src, "k.cu", [], []); nvrtc.compileProgram(p, ["--gpu-architecture=sm_90", "-Xptxas=-v"])
    log = nvrtc.getProgramLog(p); nvrtc.destroyProgram(p)
    print(i, "report" if "Used" in log else "NO REPORT", repr(log[:160]))
import time
p = nvrtc.createProgram(src + f'\nextern "C" __global__ void autotune_nonce_{time.time_ns()}() {{}}\n', "k.cu", [], [])
nvrtc.compileProgram(p, ["--gpu-architecture=sm_90", "-Xptxas=-v"]); log = nvrtc.getProgramLog(p)
print("with a nonce kernel:", "report" if "Used" in log else "NO REPORT")
PY
cat $L/nvrtc_recompile.txt
timeout 380 python3 benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 2 --out $L/vs_kernel_tuner.json > $L/vs_kernel_tuner.txt 2>&1; tail -16 $L/vs_kernel_tuner.txt | cut -c1-300
