#!/usr/bin/env bash
# Device run 17 (H200): as run 16, with two workspace slots per stream-K block (run 16: a block
# that handed over a tile's tail and then owned another tile overwrote the tail with its own
# sums, so every stream-K config was incorrect and the sweep ran without them).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_streamk.py tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 120 python3 benchmarks/explore.py --shapes 4096,8192,4097 --configs benchmarks/device/ab_streamk2.yaml \
  --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | cut -c1-190 | awk '/^==/{n=0} {if (n++ < 7) print}'
timeout 330 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json > $L/sweep.txt 2>&1
grep -E "^ +[0-9]+x|geometric" $L/sweep.txt | cut -c1-150
tar czf $OUT/run17.tar.gz -C $OUT logs
tar czf $OUT/results-h200.tar.gz -C results nvidia-h200
