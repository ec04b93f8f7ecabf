#!/usr/bin/env bash
# Device run 27 (H200, issue 3): the shape sweep again, now that the search space has the
# serpentine FMA order (MMA_ORDER 2) and its 4096^3 best as the first seed (run 26); then the
# default `autotune search --size 4096` from nothing, timed (issue 3: <= 120 s). The results
# folder travels with the tree; the updated one comes back as a tarball.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 330 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json > $L/sweep.txt 2>&1
echo "sweep exit $?" >> $L/sweep.txt
grep -E "^ +[0-9]+x|geometric|exit" $L/sweep.txt | cut -c1-110
tar czf $OUT/results-h200.tar.gz results/nvidia-h200
s=$(date +%s.%N)
AUTOTUNE_CACHE=/tmp/fresh-cache timeout 200 python3 -m autotune.cli search --size 4096 --results /tmp/fresh > $L/search4096_fresh.txt 2>&1
rc=$?
echo "autotune search --size 4096 (empty results, cold cache): exit $rc wall $(python3 -c "import time; print(round(time.time() - $s, 1))") s" | tee -a $L/search4096_fresh.txt
grep -v "^\[" $L/search4096_fresh.txt | tail -8 | cut -c1-160
tar czf $OUT/run27.tar.gz -C $OUT logs
