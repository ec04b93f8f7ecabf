#!/usr/bin/env bash
# Device run 30 (H200, issue 3): pipeline depth, paddings and group size around the 4096^3 winner, in one process
# with cuBLAS at 4096^3 and 8192^3.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 300 python3 benchmarks/explore.py --shapes 4096,8192 --configs benchmarks/device/ab_stages.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_GROUP_M8//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_STREAMK0//' | cut -c1-150 | head -24
grep -E "^== 8192" -A8 $L/explore.txt | sed 's/_GROUP_M8//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_STREAMK0//' | cut -c1-150
grep -E "^  +[a-z_]+  " $L/explore.txt | cut -c1-200 | head -5
tar czf $OUT/run30.tar.gz -C $OUT logs
