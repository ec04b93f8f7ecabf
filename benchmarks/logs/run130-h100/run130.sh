#!/usr/bin/env bash
# Run 130: fewrows with A's chunk k-major (AK): GPU correctness (the WK/AK cases, then every family at
# the awkward shapes), the 8-16 row records re-timed with AK=1 beside themselves, then those shapes
# searched with fewrows (40 trials, sampler seeds 0 / 1 / 2, each into its own copy of results/).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run130-h100; mkdir -p $L; cp run130.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 90 python3 benchmarks/probe.py --records 8x4096x4096,16x4096x4096,16x11008x4096 --set AK=1 --out $L/probe_ak.json > $L/probe_ak.txt 2>&1
tail -12 $L/probe_ak.txt
SH=8x4096x4096,16x4096x4096,16x11008x4096,8x3000x1000
for s in 0 1 2; do
  rm -rf /tmp/res$s; cp -r results /tmp/res$s
  extra=""; [ $s = 0 ] && extra="--copy-to $OUT/results"
  timeout 100 python3 benchmarks/sweep.py --shapes $SH --family fewrows --trials 40 --seed $s --results /tmp/res$s $extra \
    --out $L/sweep_fewrows_s$s.json > $L/sweep_fewrows_s$s.txt 2>&1
  tail -9 $L/sweep_fewrows_s$s.txt
done
tar czf $OUT/logs.tar.gz -C $OUT logs $( [ -d $OUT/results ] && echo results )
