#!/usr/bin/env bash
# Device run 22 (H200): issue 5's Kernel Tuner comparison after the search changes (a window of
# trials in flight, each compiled on its own thread and run when ready; TPE then neighbours of
# the best; 0.05 s trial timing; one storage per URL; NVRTC's own cache off so ptxas always
# reports). Kernel Tuner gets a cold CuPy kernel cache per run, as autotune gets a cold cache.
# Also: does CUDA_CACHE_DISABLE=1 keep NVRTC's ptxas report on a repeated compile; the GPU tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
cat > /tmp/nvrtc_check.py <<'PY'
import os, time
from cupy_backends.cuda.libs import nvrtc
src = 'extern "C" __global__ void k(float* a){ a[threadIdx.x] *= 3.f; }'
for i in range(3):
    t = time.perf_counter()
    p = nvrtc.createProgram(src, "k.cu", [], []); nvrtc.compileProgram(p, ["--gpu-architecture=sm_90", "-Xptxas=-v"])
    log = nvrtc.getProgramLog(p); nvrtc.destroyProgram(p)
    print("CUDA_CACHE_DISABLE=%s" % os.environ.get("CUDA_CACHE_DISABLE"), i, "report" if "Used" in log else "NO REPORT",
          f"{time.perf_counter() - t:.3f} s")
PY
{ python3 /tmp/nvrtc_check.py; CUDA_CACHE_DISABLE=1 python3 /tmp/nvrtc_check.py; } > $L/nvrtc_cache.txt 2>&1
cat $L/nvrtc_cache.txt
timeout 330 python3 benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 3 --windows 4,8 \
  --optimum-from results/logs/run21-h200/landscape_4096.json --out $L/vs_kernel_tuner.json > $L/vs_kernel_tuner.txt 2>&1
cut -c1-330 $L/vs_kernel_tuner.txt | tail -32
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
