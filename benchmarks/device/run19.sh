#!/usr/bin/env bash
# Device run 19 (H200): the whole GPU test suite on the final template; a stream-K neighbourhood
# of the 4096^3 winner (FMA order, prefetch, A padding, group size) against it in one process;
# `autotune check` on the stored H200 results (re-verify, re-time); SASS of the 4096^3 winner.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 290 python3 -m pytest -q -p no:cacheprovider tests/gpu > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
timeout 140 python3 benchmarks/explore.py --shapes 4096 --configs benchmarks/device/ab_streamk4096.yaml \
  --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | cut -c1-200 | head -8
timeout 100 python3 -m autotune.cli check --gpu nvidia-h200 > $L/check.txt 2>&1; echo "check exit $?" >> $L/check.txt
tail -3 $L/check.txt
timeout 30 python3 benchmarks/sass_report.py --size 4096 --gpu nvidia-h200 > $L/sass4096.json 2>&1
grep -E '"(registers|spill_bytes|smem_bytes|loop_ffma_share|loop_lds128_share_of_lds|cuobjdump)"' $L/sass4096.json
tar czf $OUT/run19.tar.gz -C $OUT logs
