#!/usr/bin/env bash
# Device run 25 (H200, issue 3): INTERIOR (k-tiles inside A and B copied without bounds checks,
# decided a k-tile ahead) against the checked copies, config by config, in one process with
# cuBLAS at 4096^3, 8192^3 and 2048^3; ncu of the winner with it; correctness where tiles are
# partly outside (M, N, K tails, K % 4 != 0, 1x1x1).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 200 python3 benchmarks/explore.py --shapes 4096,8192,2048 --configs benchmarks/device/ab_interior.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256_GROUP_M8//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_TN4//' | cut -c1-190 | head -30
grep -E "^  +[a-z_]+  " $L/explore.txt | head -5
timeout 120 python3 benchmarks/explore.py --shapes 1000,4096x4096x4100,129x257x33,4097,1x1x1,8192x8192x1024 --configs benchmarks/device/ab_interior_only.yaml --out $L/explore_odd.json > $L/explore_odd.txt 2>&1
grep -E "^==" $L/explore_odd.txt; grep -E "^  +[a-z_]+  " $L/explore_odd.txt | head -8
NCU="ncu --clock-control none --launch-skip 3 --launch-count 1 --section SchedulerStats --section WarpStateStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.avg"
BEST='{"BM":128,"BN":256,"BK":16,"WARPS_M":2,"WARPS_N":4,"LANES_N":8,"TM":8,"TN":4,"STAGES":3,"PAD_A":4,"PAD_B":0,"GROUP_M":8,"SPLITK":1,"MINB":1,"PREFETCH":0,"MMA_ORDER":0,"INTERIOR":1}'
timeout 100 $NCU --kernel-name autotune_sgemm python3 benchmarks/profile_one.py warptile "$BEST" 4096 > $L/ncu_interior4096.txt 2>&1
grep -E "Issued Warp|No Eligible|inst_executed|cycles_elapsed" $L/ncu_interior4096.txt | cut -c1-120; grep stalled $L/ncu_interior4096.txt | awk '$NF+0 >= 0.03' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110
tar czf $OUT/run25.tar.gz -C $OUT logs
