#!/usr/bin/env bash
# Device run 36 (H200, issue 3): run 35 again with the loader fixed (whole-tile configs), in one
# process; the split launch's parts timed apart with clocks and power sampled alongside.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 50 > $L/smi.csv 2>&1 &
SMI=$!
TZ=UTC timeout 150 python3 benchmarks/split_breakdown.py --shapes 4096,8192,4096x1024x4096 --reps 200 > $L/breakdown.txt 2>&1
kill $SMI
grep -v "^\s*\[" $L/breakdown.txt
timeout 200 python3 benchmarks/explore.py --shapes 4096,4096,8192,3000,4096x1024x4096 --configs benchmarks/device/ab_split.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_WARPS_M2_WARPS_N4//' | cut -c1-140
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt | cut -c1-300
tar czf $OUT/run36.tar.gz -C $OUT logs
