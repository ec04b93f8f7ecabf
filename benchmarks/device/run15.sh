#!/usr/bin/env bash
# Device run 15 (H200; no H100 is lent now): stream-K A/B against the run-6 winners at four
# shapes (cuBLAS in the same process), then the GPU tests (stream-K correctness and
# repeatability, all families at 13 awkward shapes).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
cat $L/gpu.txt
timeout 300 python3 benchmarks/explore.py --shapes 4096,4097,3000,1024 --configs benchmarks/device/ab_streamk.yaml \
  --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | cut -c1-200 | awk '/^==/{n=0} {if (n++ < 9) print}'
timeout 230 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_streamk.py tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
tar czf $OUT/run15.tar.gz -C $OUT logs
