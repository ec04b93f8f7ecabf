#!/usr/bin/env bash
# Run 123 (issue 17, the two untuned shapes below 0.85x): every stored candidate timed at the 20
# untuned ("score") shapes with today's table; then, as a diagnosis only (into a scratch copy of
# the results, never the committed table), the default search at 8192x40x8192 and at 777^3, to
# see what the families reach there when tuned.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run123-h100; mkdir -p $L; cp run123.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
( time timeout 330 python3 benchmarks/candidates.py --sets score --out $L/candidates.json ) > $L/candidates.txt 2>&1
W=/tmp/w; mkdir -p $W; cp -r results $W/
( time timeout 110 python3 -m autotune search --m 8192 --n 40 --k 8192 --results $W/results --yes ) > $L/search_8192x40x8192.txt 2>&1
( time timeout 100 python3 -m autotune search --size 777 --results $W/results --yes ) > $L/search_777.txt 2>&1
mkdir -p $L/records; cp $W/results/nvidia-h100-80gb-hbm3/8192x40x8192.json $W/results/nvidia-h100-80gb-hbm3/777x777x777.json $L/records/ 2>/dev/null
tail -n 4 $L/*.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
