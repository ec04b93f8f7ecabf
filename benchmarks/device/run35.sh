#!/usr/bin/env bash
# Device run 35 (H200, issue 3): the split launch (STREAMK 2). GPU tests (with the new split-launch
# correctness tests), then the parts of a split launch timed apart, then the 4096^3 winner's
# neighbours as whole tiles and as split launches at the sweep's large shapes, cuBLAS in-process.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 90 python3 benchmarks/split_breakdown.py --shapes 4096,8192,4096x1024x4096,2048 > $L/breakdown.txt 2>&1
cat $L/breakdown.txt
timeout 240 python3 benchmarks/explore.py --shapes 4096,4096,8192,4096x1024x4096,2048,3000 --configs benchmarks/device/ab_split.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_WARPS_M2_WARPS_N4//' | cut -c1-140
tar czf $OUT/run35.tar.gz -C $OUT logs
