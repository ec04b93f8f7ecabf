#!/usr/bin/env bash
# Run 121: the warptile search (default budget) at 4096x128x4096 with the 128 x 128 split_fused seed of
# run 120, into a copy of the results; then untuned.py (20 shapes nobody tuned) on those records;
# then landscapes of fewrows (1, 8, 16 rows) and fewcols (1, 8 columns) against 4096 x 4096.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run121-h100; mkdir -p $L/records; cp run121.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
W=/tmp/w; mkdir -p $W; cp -r results $W/
( time timeout 120 python3 -m autotune search --m 4096 --n 128 --k 4096 --family warptile --results $W/results --yes ) > $L/search_4096x128x4096.txt 2>&1
cp $W/results/nvidia-h100-80gb-hbm3/4096x128x4096.json $L/records/
timeout 200 python3 benchmarks/untuned.py --results $W/results --out $L/untuned.json > $L/untuned.txt 2>&1
timeout 130 python3 benchmarks/landscape.py --family fewrows --shapes 1x4096x4096,8x4096x4096,16x4096x4096 \
  --uniform 400 --plausible 0 --out $L/fewrows > $L/fewrows.txt 2>&1
timeout 110 python3 benchmarks/landscape.py --family fewcols --shapes 4096x1x4096,4096x8x4096 \
  --uniform 400 --plausible 0 --out $L/fewcols > $L/fewcols.txt 2>&1
tail -n 3 $L/*.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
