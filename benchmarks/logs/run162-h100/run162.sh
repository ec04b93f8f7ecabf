#!/usr/bin/env bash
# Run 162 (issue 16): fewcols with A's rows through a ring of shared memory (A_STAGES, 16-byte
# cp.async along the rows). Its GPU test; the 4096x16x4096 record re-timed with A_STAGES 2 and 3
# beside itself; fewcols searched at 8, 16 and 32 columns (40 trials, sampler seed 0, A_STAGES and
# its seeds in the space) into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run162-h100; mkdir -p $L; cp run162.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code d831a24 + fewcols A_STAGES (working tree)" >> $L/gpu.txt
timeout 90 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_correctness.py -k staged > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 50 python3 benchmarks/probe.py --records 4096x16x4096 --set A_STAGES=3 --repeat 3 --out $L/probe_a3.json > $L/probe_a3.txt 2>&1
timeout 40 python3 benchmarks/probe.py --records 4096x16x4096 --set A_STAGES=2 --repeat 3 --out $L/probe_a2.json > $L/probe_a2.txt 2>&1
grep -E "record|A_STAGES|rejected" $L/probe_a*.txt | grep -v rounds
rm -rf /tmp/res; cp -r results /tmp/res; mkdir -p $OUT/results
timeout 150 python3 benchmarks/sweep.py --shapes 4096x16x4096,4096x8x4096,4096x32x4096 --family fewcols --trials 40 --seed 0 \
  --results /tmp/res --copy-to $OUT/results --out $L/sweep_s0.json > $L/sweep_s0.txt 2>&1
grep -E "TFLOP/s  cuBLAS" $L/sweep_s0.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
