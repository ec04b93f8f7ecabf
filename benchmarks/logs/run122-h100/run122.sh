#!/usr/bin/env bash
# Run 122: the GPU correctness tests (every family's seeds, the three new warptile seeds among them,
# and random valid points at the awkward shapes, against cuBLAS) and the split/stream-K tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run122-h100; mkdir -p $L; cp run122.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 540 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py tests/gpu/test_streamk.py -m gpu > $L/gpu_tests.txt 2>&1
tail -n 3 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
