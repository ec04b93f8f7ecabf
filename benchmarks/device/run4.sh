#!/usr/bin/env bash
# Device run 4: correctness after unclamped cp.async sources; A/B of the FMA order (MMA_ORDER)
# on run 3's best configs at 4096 and 1000 (the same configs' run-3 numbers are the "before").
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
mkdir -p $OUT
timeout 100 python3 -m pytest tests/gpu/test_correctness.py -x -q -p no:cacheprovider 2>&1 | tail -3 | tee $OUT/gpu_tests.txt
timeout 200 python3 benchmarks/explore.py --shapes 4096,8192 --configs benchmarks/device/ab_order.yaml --sass --out $OUT/ab_order.json > $OUT/ab_order.txt 2>&1; grep -v rejected $OUT/ab_order.txt | cut -c1-200
P='{"BM":128,"BN":256,"BK":16,"WARPS_M":2,"WARPS_N":4,"LANES_N":8,"TM":8,"TN":4,"STAGES":3,"PAD_A":4,"PAD_B":0,"GROUP_M":8,"SPLITK":1,"MINB":1,"PREFETCH":0,"MMA_ORDER":0}'
timeout 100 ncu --kernel-name autotune_sgemm --launch-skip 3 --launch-count 1 --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio python3 benchmarks/profile_one.py warptile "$P" 4096 > $OUT/ncu_stalls.txt 2>&1
grep -E "Issued Warp|No Eligible|stalled" $OUT/ncu_stalls.txt | awk '$NF+0 > 0.05 || /Issued|Eligible/' | cut -c1-110
