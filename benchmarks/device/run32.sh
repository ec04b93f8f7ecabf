#!/usr/bin/env bash
# Device run 32 (H200, issue 3): the shape sweep with the space of runs 30-31 (up to 7 stages,
# groups of 64 block rows, the new seeds); what the compiler made of the 4096^3 winner (SASS);
# the default `autotune search --size 4096` from nothing, timed; GPU tests; `autotune check`.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 250 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json > $L/sweep.txt 2>&1
echo "sweep exit $?" >> $L/sweep.txt
grep -E "^ +[0-9]+x|geometric|exit" $L/sweep.txt | cut -c1-110
tar czf $OUT/results-h200.tar.gz results/nvidia-h200
timeout 30 python3 benchmarks/sass_report.py --size 4096 --gpu nvidia-h200 > $L/sass4096.json 2>&1
grep -E '"(config|registers|spill_bytes|smem_bytes|loop_ffma_share|loop_lds128_share_of_lds)"' $L/sass4096.json | cut -c1-150
s=$(date +%s.%N)
AUTOTUNE_CACHE=/tmp/fresh-cache timeout 150 python3 -m autotune.cli search --size 4096 --results /tmp/fresh > $L/search4096_fresh.txt 2>&1
rc=$?
echo "autotune search --size 4096 (empty results, cold cache): exit $rc wall $(python3 -c "import time; print(round(time.time() - $s, 1))") s" | tee -a $L/search4096_fresh.txt
grep -E "^warptile|took" $L/search4096_fresh.txt | cut -c1-120
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -1 $L/gpu_tests.txt
timeout 90 python3 -m autotune.cli check --gpu nvidia-h200 > $L/check.txt 2>&1; echo "check exit $?" >> $L/check.txt
tail -2 $L/check.txt
tar czf $OUT/run32.tar.gz -C $OUT logs
