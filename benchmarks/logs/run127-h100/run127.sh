#!/usr/bin/env bash
# Run 127 (issue 17): untuned.py twice more on the same code as run 126 (the spread of its figures),
# then the dispatch GPU tests that ran out of time in run 126.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run127-h100; mkdir -p $L; cp run127.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
for i in 1 2; do timeout 100 python3 benchmarks/untuned.py --out $L/untuned$i.json > $L/untuned$i.txt 2>&1; done
timeout 430 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_api_gpu.py tests/gpu/test_batches_gpu.py tests/gpu/test_layouts_gpu.py -m gpu > $L/gpu_tests.txt 2>&1
tail -n 2 $L/untuned?.txt; tail -n 3 $L/gpu_tests.txt
