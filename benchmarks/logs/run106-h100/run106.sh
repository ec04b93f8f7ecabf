#!/bin/bash
# Run 106: the transposed consumers reading the next stage's fragments during a stage's wgmmas,
# against 6764ace's form; then the tier GPU tests on it.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L; cp run106.sh exp106.py $L/
for s in 4096x4096x4096 2048x2048x2048 8192x8192x1024; do timeout 120 python3 exp106.py $s 2>&1 | tee $L/exp106_$s.txt; done
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_tiers_gpu.py tests/gpu/test_correctness.py -k "wgmma or medium or in_place or tier" > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
