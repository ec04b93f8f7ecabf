#!/usr/bin/env bash
# Device run 24 (H200, issue 3 at 4096^3): what cuBLAS's SGEMM kernel is (name, launch, registers,
# scheduler and stall figures, by ncu) beside our 4096^3 winner; then, in one process against
# cuBLAS, the winner vs AK4 variants (row-major A tile) and 2-blocks-per-SM 128x128 tiles; then
# the AK4 variants' correctness at shapes that take their scalar copy paths (K % 4 != 0).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
NCU="ncu --clock-control none --launch-skip 3 --launch-count 1 --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,sm__cycles_elapsed.avg"
timeout 120 $NCU --kernel-name regex:gemm python3 -c "
import cupy as cp
a = cp.random.rand(4096, 4096, dtype=cp.float32) - 0.5; b = cp.random.rand(4096, 4096, dtype=cp.float32) - 0.5
for _ in range(6): c = cp.matmul(a, b)
cp.cuda.Device().synchronize()" > $L/ncu_cublas4096.txt 2>&1
BEST='{"BM":128,"BN":256,"BK":16,"WARPS_M":2,"WARPS_N":4,"LANES_N":8,"TM":8,"TN":4,"STAGES":3,"PAD_A":4,"PAD_B":0,"GROUP_M":8,"SPLITK":1,"MINB":1,"PREFETCH":0,"MMA_ORDER":0}'
timeout 120 $NCU --kernel-name autotune_sgemm python3 benchmarks/profile_one.py warptile "$BEST" 4096 > $L/ncu_best4096.txt 2>&1
for f in cublas4096 best4096; do echo "== $f"; grep -E "  [a-z_0-9]+gemm|autotune_sgemm \(|Registers Per|Block Size|Grid Size|Shared Memory Config|Dynamic Shared|Issued Warp|No Eligible|Active Warps Per|Theoretical Occ|inst_executed|cycles_elapsed" $L/ncu_$f.txt | cut -c1-120; grep stalled $L/ncu_$f.txt | awk '$NF+0 >= 0.03' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110; done
timeout 240 python3 benchmarks/explore.py --shapes 4096 --configs benchmarks/device/ab_ak4.yaml --out $L/explore4096.json > $L/explore4096.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore4096.txt | cut -c1-250 | head -30
grep -E "^  +[a-z_]+  " $L/explore4096.txt | head -5
timeout 150 python3 benchmarks/explore.py --shapes 1000,4097,257x129x131,1x1x1 --configs benchmarks/device/ab_ak4_only.yaml --out $L/explore_odd.json > $L/explore_odd.txt 2>&1
grep -E "^==" $L/explore_odd.txt; grep -E "^  +[a-z_]+  " $L/explore_odd.txt | head -8
tar czf $OUT/run24.tar.gz -C $OUT logs
