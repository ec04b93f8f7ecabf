#!/usr/bin/env bash
# Run 133: the WK / AK GPU test after its configs are built per layout (the same 12 a layout).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run133-h100; mkdir -p $L; cp run133.sh $L/
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 5 tests/gpu/test_correctness.py -k "warps_along_k" > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
