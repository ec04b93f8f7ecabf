#!/usr/bin/env bash
# Run 125 (issue 17): every stored candidate timed at all three sets of untuned shapes in one
# process, today's table: "fit" (now 40 shapes: odd sizes and row or column counts no tile
# divides added) to choose the dispatch model on, "score" and "check" to report it on.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run125-h100; mkdir -p $L; cp run125.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
( time timeout 540 python3 benchmarks/candidates.py --sets fit,score,check --out $L/candidates.json ) > $L/candidates.txt 2>&1
tail -n 3 $L/candidates.txt
