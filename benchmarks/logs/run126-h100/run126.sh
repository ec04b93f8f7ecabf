#!/usr/bin/env bash
# Run 126 (issue 17): the dispatch model with launch distance (SHARING 0.5, LAUNCH_US 4, chosen on
# run 125's fit shapes): untuned.py's 20 shapes with the committed table, then the dispatch GPU tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run126-h100; mkdir -p $L; cp run126.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
( time timeout 300 python3 benchmarks/untuned.py --out $L/untuned.json ) > $L/untuned.txt 2>&1
timeout 250 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_api_gpu.py tests/gpu/test_batches_gpu.py tests/gpu/test_layouts_gpu.py -m gpu > $L/gpu_tests.txt 2>&1
tail -n 8 $L/untuned.txt; tail -n 3 $L/gpu_tests.txt
