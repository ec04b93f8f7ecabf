#!/usr/bin/env bash
# Run 156 (issue 16): PIPE again, now with two load buffers in turn (run 155's PIPE copied the
# next loads into the current buffer, which waited for them). GPU tests with and without PIPE;
# the 8-16 row / column records re-timed with PIPE=1 beside themselves; the two families
# searched at those shapes (40 trials, sampler seeds 0 and 1) into copies of results/. And the
# tiny cubes' coarse1d record with the whole of K in one tile (BK 128 at 128^3).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run156-h100; mkdir -p $L; cp run156.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT) + PIPE in two buffers (working tree)" >> $L/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_correctness.py -k warps_along_k > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
SH=16x4096x4096,4096x16x4096,8x4096x4096,4096x8x4096,8x3000x1000,1x3000x1000,1x4096x4096,4096x1x4096
timeout 120 python3 benchmarks/probe.py --records $SH --set PIPE=1 --repeat 3 --out $L/probe_pipe.json > $L/probe_pipe.txt 2>&1
grep -E "record|PIPE=1" $L/probe_pipe.txt | grep -v rounds
timeout 60 python3 benchmarks/probe.py --records 128x128x128,64x64x64 --set BK=128 --repeat 5 --out $L/probe_bk128.json > $L/probe_bk128.txt 2>&1
grep -E "record|BK=|rejected" $L/probe_bk128.txt | grep -v rounds
mkdir -p $OUT/results
for S in 0 1; do
  rm -rf /tmp/res$S; cp -r results /tmp/res$S
  timeout 200 python3 benchmarks/sweep.py --shapes 16x4096x4096,4096x16x4096,8x4096x4096,4096x8x4096,16x11008x4096 \
    --family fewrows fewcols --trials 40 --seed $S --results /tmp/res$S --out $L/sweep_s$S.json > $L/sweep_s$S.txt 2>&1
  tail -10 $L/sweep_s$S.txt
  mkdir -p $OUT/results/s$S; cp /tmp/res$S/nvidia-h100-80gb-hbm3/{16x4096x4096,4096x16x4096,8x4096x4096,4096x8x4096,16x11008x4096}.json $OUT/results/s$S/
done
tar czf $OUT/logs.tar.gz -C $OUT logs results
