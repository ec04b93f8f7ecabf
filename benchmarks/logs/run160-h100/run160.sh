#!/usr/bin/env bash
# Run 160 (issue 16): the remaining small-set shapes whose records came from 30-trial searches,
# searched longer (100 trials, sampler seed 3) into a copy of results/: warptile (with 16-row tiles
# now) at 32-200 rows, a deep K under a small C and a shallow K; the small-tile families at the
# tiny cubes and at K = 4 and 16.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run160-h100; mkdir -p $L; cp run160.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT) + BM 16 (as run 158)" >> $L/gpu.txt
rm -rf /tmp/res; cp -r results /tmp/res; mkdir -p $OUT/results
timeout 330 python3 benchmarks/sweep.py --shapes 32x4096x11008,128x11008x4096,200x4096x4096,256x256x16384,4096x4096x64 \
  --family warptile --trials 100 --seed 3 --results /tmp/res --copy-to $OUT/results --out $L/sweep_warptile.json > $L/sweep_warptile.txt 2>&1
grep -E "TFLOP/s  cuBLAS" $L/sweep_warptile.txt
timeout 200 python3 benchmarks/sweep.py --shapes 32x32x32,64x64x64,128x128x128,4096x4096x4,4096x4096x16 \
  --family tiled coarse1d coarse2d vectorized --trials 100 --seed 3 --results /tmp/res --copy-to $OUT/results --out $L/sweep_small_tiles.json > $L/sweep_small_tiles.txt 2>&1
grep -E "TFLOP/s  cuBLAS|^  *[0-9]+x[0-9]+x[0-9]+ " $L/sweep_small_tiles.txt | head -30
tar czf $OUT/logs.tar.gz -C $OUT logs results
