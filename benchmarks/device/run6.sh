#!/usr/bin/env bash
# Device run 6: the performance sweep (ten shapes, warptile tuned per shape, cuBLAS in the
# same process), recorded into results/ beside run 5's searches.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
timeout 560 python3 benchmarks/sweep.py --trials 40 --out $L/sweep.json 2>&1 | tee $L/sweep.txt | tail -25
tar czf $OUT/run6.tar.gz results/nvidia-h100-80gb-hbm3 -C $OUT logs
