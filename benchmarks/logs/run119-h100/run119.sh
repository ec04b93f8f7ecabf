#!/usr/bin/env bash
# Run 119: a landscape of warptile's few-columns region (benchmarks/spaces/warptile_few_cols.yaml)
# at 4096 x {16, 32, 64, 128} x 4096, the three records among it, cuBLAS in the same process.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run119-h100; mkdir -p $L; cp run119.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 520 python3 benchmarks/landscape.py --config benchmarks/spaces/warptile_few_cols.yaml \
  --shapes 4096x32x4096,4096x64x4096,4096x128x4096,4096x16x4096 --uniform 300 --plausible 0 --out $L 2>&1 | tee $L/landscape.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
