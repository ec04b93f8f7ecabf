#!/usr/bin/env bash
# Run 159 (issue 16): warptile's default space (with 16-row tiles) searched longer -- 100 trials,
# sampler seed 3 -- at the small-set shapes of 8-200 rows or 32-128 columns whose records came from
# 30-40-trial searches, into a copy of results/ (a record is replaced only by a faster entry).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run159-h100; mkdir -p $L; cp run159.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT) + BM 16 (as run 158)" >> $L/gpu.txt
rm -rf /tmp/res; cp -r results /tmp/res; mkdir -p $OUT/results
timeout 560 python3 benchmarks/sweep.py --shapes 128x4096x4096,64x4096x4096,8x3000x1000,200x3000x1000,32x4096x4096,4096x32x4096,4096x128x4096 \
  --family warptile --trials 100 --seed 3 --results /tmp/res --copy-to $OUT/results --out $L/sweep_s3.json > $L/sweep_s3.txt 2>&1
grep -E "^NVIDIA|^warptile|search took" $L/sweep_s3.txt
tail -12 $L/sweep_s3.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
