#!/usr/bin/env bash
# Device run 33 (H200, issue 3): why the same kernel is 1.015x cuBLAS at 8192^3 and 0.993x at
# 4096^3. If per-tile fixed costs (prologue, epilogue) are the cause, the ratio rises with K at
# 4096x4096 and 8192x8192x4096 stays near 4096^3's; if the tile count is, the other way round.
# Then ncu (memory and stall figures) of the winner at 4096^3 and 8192^3.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 200 python3 benchmarks/explore.py --shapes 4096x4096x2048,4096,4096x4096x8192,4096x4096x16384,8192x8192x4096,8192 --configs benchmarks/device/ab_depth.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_STREAMK0//; s/_WARPS_M2_WARPS_N4//' | cut -c1-140
W='{"BM":128,"BN":256,"BK":16,"WARPS_M":2,"WARPS_N":4,"LANES_N":8,"TM":8,"TN":4,"STAGES":7,"PAD_A":4,"PAD_B":0,"GROUP_M":64,"SPLITK":1,"MINB":1,"PREFETCH":0,"MMA_ORDER":2}'
NCU="ncu --clock-control none --launch-skip 3 --launch-count 1 --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.avg,lts__t_sector_hit_rate.pct,dram__bytes_read.sum"
for S in 4096 8192; do
  timeout 120 $NCU --kernel-name autotune_sgemm python3 benchmarks/profile_one.py warptile "$W" $S > $L/ncu_winner$S.txt 2>&1
  echo "== ncu $S"; grep -E "Issued Warp|No Eligible|inst_executed|cycles_elapsed|hit_rate|dram__bytes|L2 Hit|Mem Busy|Max Bandwidth" $L/ncu_winner$S.txt | cut -c1-120
  grep stalled $L/ncu_winner$S.txt | awk '$NF+0 >= 0.03' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110
done
tar czf $OUT/run33.tar.gz -C $OUT logs
