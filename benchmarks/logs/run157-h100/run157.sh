#!/usr/bin/env bash
# Run 157 (issue 16): warptile with 16-row and 16-column tiles (benchmarks/spaces/warptile_16.yaml)
# at 8-16 rows and columns, where fewrows / fewcols keep four loads a thread in flight (run 154):
# the streamed operand through warptile's cp.async stages instead. The committed records re-timed
# first (probe.py), then the search (40 trials, sampler seed 0) into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run157-h100; mkdir -p $L; cp run157.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT) + benchmarks/spaces/warptile_16.yaml" >> $L/gpu.txt
SH=16x4096x4096,8x4096x4096,16x11008x4096,4096x16x4096,4096x8x4096
timeout 90 python3 benchmarks/probe.py --records $SH --repeat 3 --out $L/probe_records.json > $L/probe_records.txt 2>&1
grep -E "record" $L/probe_records.txt
rm -rf /tmp/res; cp -r results /tmp/res
timeout 420 python3 -m autotune search --sizes $SH --family warptile --config benchmarks/spaces/warptile_16.yaml \
  --trials 40 --seed 0 --results /tmp/res > $L/search16.txt 2>&1
tail -25 $L/search16.txt
mkdir -p $OUT/results; for s in ${SH//,/ }; do cp /tmp/res/nvidia-h100-80gb-hbm3/$s.json $OUT/results/; done
tar czf $OUT/logs.tar.gz -C $OUT logs results
