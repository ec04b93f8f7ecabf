#!/usr/bin/env bash
# Device run 3: correctness after the cross-tile prefetch; A/B of PREFETCH on run 2's best
# configs at 4096; stall reasons of the best; the default search's wall time.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
mkdir -p $OUT
timeout 100 python3 -m pytest tests/gpu/test_correctness.py -x -q -p no:cacheprovider 2>&1 | tail -3 | tee $OUT/gpu_tests.txt
timeout 150 python3 benchmarks/explore.py --shapes 4096 --configs benchmarks/device/ab_prefetch.yaml --sass --out $OUT/ab_prefetch.json > $OUT/ab_prefetch.txt 2>&1; head -30 $OUT/ab_prefetch.txt | cut -c1-200
for pf in 0 1; do
P="{\"BM\":64,\"BN\":256,\"BK\":8,\"WARPS_M\":1,\"WARPS_N\":4,\"LANES_N\":8,\"TM\":4,\"TN\":4,\"STAGES\":2,\"PAD_A\":4,\"PAD_B\":0,\"GROUP_M\":8,\"SPLITK\":1,\"MINB\":2,\"PREFETCH\":$pf}"
timeout 100 ncu --kernel-name autotune_sgemm --launch-skip 3 --launch-count 1 --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio python3 benchmarks/profile_one.py warptile "$P" 4096 > $OUT/ncu_stalls_pf$pf.txt 2>&1
grep -E "Issued Warp|No Eligible|stalled" $OUT/ncu_stalls_pf$pf.txt | awk '$NF+0 > 0.05 || /Issued|Eligible/' | cut -c1-110
done
( time timeout 170 python3 -m autotune.cli search --size 4096 --results /tmp/res ) > $OUT/search4096_default.txt 2>&1; tail -12 $OUT/search4096_default.txt
