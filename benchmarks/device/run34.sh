#!/usr/bin/env bash
# Device run 34 (H200, issue 3): the 4096^3 winner's neighbourhood, timed three times in one
# process with cuBLAS (each pass re-times cuBLAS before and after), to see whether any config is
# at or above 1.00x beyond the run-to-run spread.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 300 python3 benchmarks/explore.py --shapes 4096,4096,4096 --configs benchmarks/device/ab_final4096.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_WARPS_M2_WARPS_N4//' | cut -c1-140
tar czf $OUT/run34.tar.gz -C $OUT logs
