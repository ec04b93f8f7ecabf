#!/usr/bin/env bash
# Device run 28 (H200, issue 3): the FMA orders, old and new (3, 4), in one process with cuBLAS at
# 4096^3, 8192^3 and 2048^3 (correctness at awkward shapes too); the GPU test suite; `autotune
# check` on the results stored by run 27's sweep.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 200 python3 benchmarks/explore.py --shapes 4096,8192,2048 --configs benchmarks/device/ab_order2.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_TM8_TN4_WARPS_M2_WARPS_N4//' | cut -c1-150 | head -40
grep -E "^  +[a-z_]+  " $L/explore.txt | cut -c1-200 | head -5
timeout 100 python3 benchmarks/explore.py --shapes 1000,4096x4096x4100,129x257x33,4097,1x1x1 --configs benchmarks/device/ab_order2.yaml --out $L/explore_odd.json > $L/explore_odd.txt 2>&1
grep -E "^==" $L/explore_odd.txt; grep -E "^  +[a-z_]+  " $L/explore_odd.txt | head -8
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 100 python3 -m autotune.cli check --gpu nvidia-h200 > $L/check.txt 2>&1; echo "check exit $?" >> $L/check.txt
tail -4 $L/check.txt
tar czf $OUT/run28.tar.gz -C $OUT logs
