#!/usr/bin/env bash
# Device run 2: where does the warptile family stand across tiles and shapes, and why.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
mkdir -p $OUT
timeout 100 python3 -m pytest tests/gpu/test_correctness.py -x -q -p no:cacheprovider 2>&1 | tail -3 | tee $OUT/gpu_tests.txt
BEST='{"BM":128,"BN":256,"BK":16,"WARPS_M":2,"WARPS_N":4,"LANES_N":8,"TM":8,"TN":4,"STAGES":3,"PAD_A":4,"PAD_B":0,"GROUP_M":8,"SPLITK":1,"MINB":1}'
timeout 120 ncu --kernel-name autotune_sgemm --launch-skip 3 --launch-count 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy python3 benchmarks/profile_one.py warptile "$BEST" 4096 > $OUT/ncu_best4096.txt 2>&1; tail -60 $OUT/ncu_best4096.txt | grep -v "^    ---" | cut -c1-110 | grep -E "Throughput|Stall|Issue|Eligible|Active|Occupancy|Warp Cycles|No Eligible|Registers|Block Limit|SM Busy|Executed Ipc|  [A-Z]" | head -40
timeout 240 python3 benchmarks/explore.py --shapes 4096 --family warptile --sample 110 --seed 2 --where SPLITK=1 --sass --out $OUT/explore4096.json > $OUT/explore4096.txt 2>&1; head -40 $OUT/explore4096.txt | cut -c1-200
timeout 200 python3 benchmarks/explore.py --shapes 1024,1000,1024x1024x8192 --family warptile --sample 60 --seed 3 --out $OUT/explore_small.json > $OUT/explore_small.txt 2>&1; grep -A12 "==" $OUT/explore_small.txt | cut -c1-200
( time timeout 170 python3 -m autotune.cli search --size 4096 --results /tmp/res ) > $OUT/search4096_default.txt 2>&1; tail -12 $OUT/search4096_default.txt
