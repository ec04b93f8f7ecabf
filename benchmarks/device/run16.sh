#!/usr/bin/env bash
# Device run 16 (H200): stream-K owner sums slots into C (no adds into live accumulators). GPU
# tests first (stream-K correctness and repeatability, all families at 13 shapes), then the
# ten-shape sweep (warptile tuned per shape, cuBLAS in the same process), then a stream-K A/B.
# Found: a block reused its one slot for its own sums; every stream-K config was incorrect, so
# this sweep ran on whole-tile configs only. Fixed in run 17.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_streamk.py tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 330 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json > $L/sweep.txt 2>&1
grep -E "^ +[0-9]+x|geometric" $L/sweep.txt | cut -c1-150
timeout 120 python3 benchmarks/explore.py --shapes 4096,4097 --configs benchmarks/device/ab_streamk2.yaml \
  --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | cut -c1-190 | awk '/^==/{n=0} {if (n++ < 7) print}'
tar czf $OUT/run16.tar.gz -C $OUT logs
tar czf $OUT/results-h200.tar.gz -C results nvidia-h200
