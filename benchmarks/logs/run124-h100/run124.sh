#!/usr/bin/env bash
# Run 124 (issue 17): every stored candidate timed at the "fit" shapes (to choose the dispatch
# model's constants on) and at the new "check" shapes (to report a model change on), today's table.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run124-h100; mkdir -p $L; cp run124.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
( time timeout 500 python3 benchmarks/candidates.py --sets fit,check --out $L/candidates.json ) > $L/candidates.txt 2>&1
tail -n 45 $L/candidates.txt
