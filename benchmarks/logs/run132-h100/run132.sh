#!/usr/bin/env bash
# Run 132 (issue 17): untuned.py on the table as committed after fewrows' WK / AK records (runs
# 129-130 replaced five few-row records the dispatch model chooses from).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run132-h100; mkdir -p $L; cp run132.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 150 python3 benchmarks/untuned.py --out $L/untuned.json > $L/untuned.txt 2>&1
tail -n 26 $L/untuned.txt
