#!/usr/bin/env bash
# Run 141: fewcols' WK GPU test with a point the static filter keeps in every layout and reduction;
# the layouts and split / stream-K GPU tests (the copies in row pieces: PACKB 2, C copied, beta).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run141-h100; mkdir -p $L; cp run141.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 5 -rf tests/gpu/test_correctness.py -k fewcols_warps_along_k > $L/gpu_tests_wk.txt 2>&1
tail -2 $L/gpu_tests_wk.txt
timeout 230 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_layouts_gpu.py tests/gpu/test_streamk.py > $L/gpu_tests_copies.txt 2>&1
tail -2 $L/gpu_tests_copies.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
