#!/usr/bin/env bash
# Device run 9 (H100): all GPU tests (full log), then autotune vs Kernel Tuner at 4096^3.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
timeout 230 python3 -m pytest tests/gpu -q -rA -p no:cacheprovider > $L/gpu_tests.txt 2>&1; grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " $L/gpu_tests.txt | head -40
timeout 330 python3 benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 2 --out $L/vs_kernel_tuner.json > $L/vs_kernel_tuner.txt 2>&1; tail -25 $L/vs_kernel_tuner.txt
