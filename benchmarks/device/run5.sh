#!/usr/bin/env bash
# Device run 5: GPU tests; the foundation searches (1024^3, 2048^3, 4096^3, all families,
# default settings) into results/; the regression check of what they stored; SASS of the
# 4096 winner with the GPU machine's cuobjdump.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
timeout 150 python3 -m pytest tests/gpu -x -q -p no:cacheprovider 2>&1 | tail -5 | tee $L/gpu_tests.txt
for s in 1024 2048 4096; do
  ( time timeout 170 python3 -m autotune.cli search --size $s ) > $L/search_$s.txt 2>&1
  tail -11 $L/search_$s.txt
done
timeout 120 python3 -m autotune.cli check > $L/check.txt 2>&1; echo "check rc=$?" >> $L/check.txt; tail -20 $L/check.txt
timeout 60 python3 benchmarks/sass_report.py --size 4096 > $L/sass_4096.json 2>&1; head -30 $L/sass_4096.json
tar czf $OUT/run5.tar.gz results/nvidia-h100-80gb-hbm3 -C $OUT logs
