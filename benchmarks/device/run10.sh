#!/usr/bin/env bash
# Device run 10 (H100): GPU tests with the fault test first (run 7 saw correctness fail right
# after a fault search), several shapes in one command, and autotune vs Kernel Tuner again with
# a cold compile cache for autotune (run 9's autotune runs reused the brute force's compiles).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
timeout 200 python3 -m pytest tests/gpu/test_faults.py tests/gpu/test_correctness.py tests/gpu/test_api_gpu.py tests/gpu/test_search_gpu.py -q -rA -p no:cacheprovider > $L/gpu_tests.txt 2>&1
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " $L/gpu_tests.txt | head -30
timeout 60 python3 -m autotune.cli search --sizes 512,768x1000x640 --family warptile --trials 8 --results /tmp/sizes > $L/search_sizes.txt 2>&1; grep -E "wrote|cuBLAS" $L/search_sizes.txt
timeout 320 python3 benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 2 --out $L/vs_kernel_tuner.json > $L/vs_kernel_tuner.txt 2>&1; tail -14 $L/vs_kernel_tuner.txt
