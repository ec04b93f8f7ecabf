#!/usr/bin/env bash
# Run 136 (issue 19): medium nn at 2048^3 (its record also reads in place: the transposed
# consumers' epilogue) before (_old) and after, 15 rounds alternating with cuBLAS TF32; medium's
# default search at 2048^3 on the new code into a copy of results/. Issue 17: the 777^3 choice at
# 776^3 / 780^3 (no copies) and with PACKB 0 (no copies, 4-byte atomics), to see what the copies cost.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run136-h100; mkdir -p $L; cp run136.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
NEW="env PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atc_new"
OLD="env PYTHONPATH=/tmp/site:$PWD/_old AUTOTUNE_CACHE=/tmp/atc_old"
R=$PWD/results
for v in OLD NEW; do
  T=$( [ $v = OLD ] && echo $PWD/_old || echo $PWD )
  ${!v} timeout 60 python3 $T/benchmarks/probe.py --results $R --records 2048x2048x2048_medium --repeat 15 \
    --out $L/medium2048_${v}.json > $L/medium2048_${v}.txt 2>&1
  echo "== $v"; tail -3 $L/medium2048_${v}.txt
done
rm -rf /tmp/res; cp -r results /tmp/res
$NEW timeout 100 python3 -m autotune search --size 2048 --precision medium --family wgmma_tf32 --results /tmp/res \
  --quiet > $L/search_medium_2048.txt 2>&1
tail -5 $L/search_medium_2048.txt
mkdir -p $OUT/results/nvidia-h100-80gb-hbm3; cp /tmp/res/nvidia-h100-80gb-hbm3/2048x2048x2048_medium.json $OUT/results/nvidia-h100-80gb-hbm3/
$NEW timeout 60 python3 benchmarks/probe.py --records 200x3000x1000 --shapes 776,777,780 --set PACKB=0 --repeat 5 \
  --out $L/odd_n.json > $L/odd_n.txt 2>&1
cat $L/odd_n.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
