#!/usr/bin/env bash
# Device run 26 (H200, issue 3): UNROLL_K (k-steps per body of the loop over a k-tile, a smaller
# loop for the instruction cache) x FMA order x BK x stages, in one process with cuBLAS at 4096^3
# and 8192^3; ncu of the best partly unrolled config; correctness at awkward shapes.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 200 python3 benchmarks/explore.py --shapes 4096,8192 --configs benchmarks/device/ab_unroll.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/_BM128_BN256//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_TM8_TN4_WARPS_M2_WARPS_N4//' | cut -c1-160 | head -40
grep -E "^  +[a-z_]+  " $L/explore.txt | cut -c1-200 | head -5
timeout 100 python3 benchmarks/explore.py --shapes 1000,4096x4096x4100,129x257x33,4097,1x1x1 --configs benchmarks/device/ab_unroll_odd.yaml --out $L/explore_odd.json > $L/explore_odd.txt 2>&1
grep -E "^==" $L/explore_odd.txt; grep -E "^  +[a-z_]+  " $L/explore_odd.txt | head -8
BEST=$(python3 -c "
import json; d = json.load(open('$L/explore.json'))['shapes']['4096x4096x4096']['measurements']
ok = [m for m in d if m.get('status') == 'ok' and m['config']['params'].get('UNROLL_K')]
print(json.dumps(max(ok, key=lambda m: m['gflops'])['config']['params']))" 2>/dev/null)
echo "ncu: $BEST"
NCU="ncu --clock-control none --launch-skip 3 --launch-count 1 --section SchedulerStats --section WarpStateStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.avg"
[ -n "$BEST" ] && timeout 100 $NCU --kernel-name autotune_sgemm python3 benchmarks/profile_one.py warptile "$BEST" 4096 > $L/ncu_unroll4096.txt 2>&1
grep -E "Issued Warp|No Eligible|inst_executed|cycles_elapsed" $L/ncu_unroll4096.txt | cut -c1-120; grep stalled $L/ncu_unroll4096.txt | awk '$NF+0 >= 0.03' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110
tar czf $OUT/run26.tar.gz -C $OUT logs
