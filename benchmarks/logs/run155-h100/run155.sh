#!/usr/bin/env bash
# Run 155 (issue 16): fewrows / fewcols with PIPE (the next step's loads issued before this step's
# FMAs). GPU tests of both families with and without PIPE; each 8-16 row / column record re-timed
# with PIPE=1 beside itself; then the two families searched again at those shapes (40 trials,
# sampler seed 0, PIPE and its seeds in the space) into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run155-h100; mkdir -p $L; cp run155.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT) + PIPE (working tree)" >> $L/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_correctness.py -k warps_along_k > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
SH=16x4096x4096,4096x16x4096,8x4096x4096,4096x8x4096,16x11008x4096,8x3000x1000,1x3000x1000,1x4096x4096
timeout 120 python3 benchmarks/probe.py --records $SH --set PIPE=1 --repeat 3 --out $L/probe_pipe.json > $L/probe_pipe.txt 2>&1
grep -E "rejected|rounds|geometric" $L/probe_pipe.txt; grep -B1 "rounds" $L/probe_pipe.txt | grep -v rounds | head -20
rm -rf /tmp/res0; cp -r results /tmp/res0
mkdir -p $OUT/results
timeout 330 python3 benchmarks/sweep.py --shapes $SH --family fewrows fewcols --trials 40 --seed 0 --results /tmp/res0 \
  --copy-to $OUT/results --out $L/sweep_s0.json > $L/sweep_s0.txt 2>&1
tail -14 $L/sweep_s0.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
