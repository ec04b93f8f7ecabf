#!/usr/bin/env bash
# Device run 20 (H200): GPU tests after the runner's workspaces became per kernel with a byte
# budget (a search kept one per loaded kernel, unbounded). No kernel code changed.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
