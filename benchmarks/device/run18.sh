#!/usr/bin/env bash
# Device run 18 (H200): stream-K owner adds peers' partials half a tile at a time (run 17's
# park-and-sum-from-memory cost 15% at 1024^3), whole-tile epilogue as in run 15, and B packed
# to a 16-byte pitch when N % 4 != 0 (PACKB). GPU tests; A/B at four shapes; the ten-shape
# sweep; then the default `autotune search --size 4096`, timed.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_streamk.py tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 110 python3 benchmarks/explore.py --shapes 4097,1024,3000,4096 --configs benchmarks/device/ab_streamk3.yaml \
  --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | cut -c1-200 | awk '/^==/{n=0} {if (n++ < 5) print}'
timeout 270 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json > $L/sweep.txt 2>&1
grep -E "^ +[0-9]+x|geometric" $L/sweep.txt | cut -c1-110
s=$(date +%s.%N)
timeout 150 python3 -m autotune.cli search --size 4096 > $L/search4096.txt 2>&1
echo "autotune search --size 4096: exit $? wall $(echo "$(date +%s.%N) - $s" | bc) s" | tee -a $L/search4096.txt
tar czf $OUT/run18.tar.gz -C $OUT logs
tar czf $OUT/results-h200.tar.gz -C results nvidia-h200
