#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L; cp run101.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 400 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_tiers_gpu.py tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
