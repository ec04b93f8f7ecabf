#!/usr/bin/env bash
# Device run 38 (H200, issue 3): after the review -- the stream-K and split-launch GPU tests
# (their shared helpers), and the exported headers, whose split launch now scales C's tail tiles
# only after the workspace and packed B (0da0630). No timing.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_streamk.py tests/gpu/test_search_gpu.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt | cut -c1-300
