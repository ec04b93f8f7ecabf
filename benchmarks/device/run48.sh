#!/usr/bin/env bash
# Device run 48 (H200, issue 3): the whole GPU test suite on the final template.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
timeout 540 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
echo "exit $?" >> $L/gpu_tests.txt
tail -4 $L/gpu_tests.txt | cut -c1-300
tar czf $OUT/run48.tar.gz -C $OUT logs
