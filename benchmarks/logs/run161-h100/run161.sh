#!/usr/bin/env bash
# Run 161 (issue 16): the default `autotune search --size 4096` again from an empty results folder
# and a cold compile cache (run 158 read 0.98x on its re-time with the 16-row tiles in the space),
# then the small-tile families at the shapes run 160 had no time for: 128^3 and K = 4, 16
# (60 trials, sampler seed 3) into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run161-h100; mkdir -p $L; cp run161.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code ef644e0" >> $L/gpu.txt
rm -rf /tmp/empty; mkdir /tmp/empty
T1=$(date +%s)
AUTOTUNE_CACHE=/tmp/atc_cold timeout 150 python3 -m autotune search --size 4096 --results /tmp/empty > $L/default_4096.txt 2>&1
echo "default search: $(( $(date +%s) - T1 )) s wall" | tee -a $L/default_4096.txt; grep -E "^warptile|search took" $L/default_4096.txt
rm -rf /tmp/res; cp -r results /tmp/res; mkdir -p $OUT/results
AUTOTUNE_CACHE=/tmp/atcache timeout 200 python3 benchmarks/sweep.py --shapes 128x128x128,4096x4096x16,4096x4096x4 \
  --family coarse1d coarse2d vectorized --trials 60 --seed 3 --results /tmp/res --copy-to $OUT/results --out $L/sweep_small_tiles.json > $L/sweep_small_tiles.txt 2>&1
grep -E "TFLOP/s  cuBLAS" $L/sweep_small_tiles.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
