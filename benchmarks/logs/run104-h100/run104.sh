#!/bin/bash
# Run 104: DIRECT=1 with TF32 tensor maps (no rounding pass; nt through the prepared consumers):
# GPU tier and correctness tests, then the seeds and a few tiles against the prepared seed and cuBLAS TF32.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L; cp run104.sh exp104.py $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_tiers_gpu.py tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
timeout 150 python3 exp104.py 4096x4096x4096:nn,4096x4096x4096:nt,8192x8192x1024:nn,8192x8192x1024:nt "" $L/exp104_a.json 2>&1 | tee $L/exp104_a.txt
timeout 100 python3 exp104.py 2048x2048x2048:nn,1000x776x300:nt,1000x777x300:nn "" $L/exp104_b.json 2>&1 | tee $L/exp104_b.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
