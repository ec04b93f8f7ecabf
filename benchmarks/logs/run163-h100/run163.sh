#!/usr/bin/env bash
# Run 163: the GPU tests of every family at the awkward shapes on the committed code (fewcols'
# A_STAGES seeds among them), and fewcols' and fewrows' own cases.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run163-h100; mkdir -p $L; cp run163.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code d0e22c0" >> $L/gpu.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 12 -rf tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
