#!/usr/bin/env bash
# Device run 47 (H200, issue 3): run 46 again with studies named by the template text too (fresh
# measurements with the current template), the default search from nothing (time), the SASS
# report of the 4096^3 winner (main and tail kernels), and check.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 300 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json > $L/sweep.txt 2>&1
echo "sweep exit $?" >> $L/sweep.txt
grep -E "^ +[0-9]+x|geometric|exit" $L/sweep.txt | cut -c1-120
tar czf $OUT/results-h200.tar.gz results/nvidia-h200
timeout 30 python3 benchmarks/sass_report.py --size 4096 --gpu nvidia-h200 > $L/sass4096.json 2>&1
grep -E '"(config|registers|spill_bytes|smem_bytes|loop_instructions|loop_ffma_share|loop_lds128_share_of_lds|tail_kernel)"' $L/sass4096.json | cut -c1-150
s=$(date +%s.%N)
AUTOTUNE_CACHE=/tmp/fresh-cache timeout 150 python3 -m autotune.cli search --size 4096 --results /tmp/fresh > $L/search4096_fresh.txt 2>&1
rc=$?
echo "autotune search --size 4096 (empty results, cold cache): exit $rc wall $(python3 -c "import time; print(round(time.time() - $s, 1))") s" | tee -a $L/search4096_fresh.txt
timeout 90 python3 -m autotune.cli check --gpu nvidia-h200 > $L/check.txt 2>&1; echo "check exit $?" >> $L/check.txt
tail -2 $L/check.txt
tar czf $OUT/run47.tar.gz -C $OUT logs
