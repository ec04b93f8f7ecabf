#!/usr/bin/env bash
# Run 120: warptile searches (default budget) with the two 64-row seeds of run 119 at 4096 x
# {16, 32, 64} x 4096 into a copy of the results; the default search at 4096^3 from an empty
# results folder and compile cache (time and ratio with the two seeds more); a landscape of
# benchmarks/spaces/warptile_128_cols.yaml at 4096x128x4096 and 128x4096x4096.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run120-h100; mkdir -p $L; cp run120.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
W=/tmp/w; mkdir -p $W; cp -r results $W/
( time timeout 240 python3 -m autotune search --sizes 4096x32x4096,4096x64x4096,4096x16x4096 --family warptile \
    --results $W/results --yes ) > $L/search_cols.txt 2>&1
mkdir -p $L/records; for s in 4096x32x4096 4096x64x4096 4096x16x4096; do cp $W/results/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
( time AUTOTUNE_CACHE=/tmp/atcache2 timeout 180 python3 -m autotune search --size 4096 --results /tmp/fresh --yes ) > $L/search_4096.txt 2>&1
timeout 300 python3 benchmarks/landscape.py --config benchmarks/spaces/warptile_128_cols.yaml \
  --shapes 4096x128x4096,128x4096x4096 --uniform 150 --plausible 200 --out $L/landscape128 2>&1 | tee $L/landscape128.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
