#!/usr/bin/env bash
# Run 135 (issue 19): medium nn at 4096^3 before (_old: HEAD's epilogue, 4-byte stores) and after
# (8-byte stores after a shuffle), each in 15 rounds alternating with cuBLAS TF32, two processes
# each; then medium's default search at 4096^3 on the new code into a copy of results/. Issue 16:
# ncu of fewcols' 4096x16x4096 record beside cuBLAS there (what the few-columns family lacks).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run135-h100; mkdir -p $L; cp run135.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
NEW="env PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atc_new"
OLD="env PYTHONPATH=/tmp/site:$PWD/_old AUTOTUNE_CACHE=/tmp/atc_old"
R=$PWD/results
for i in 1 2; do
  for v in OLD NEW; do
    T=$( [ $v = OLD ] && echo $PWD/_old || echo $PWD )
    ${!v} timeout 70 python3 $T/benchmarks/probe.py --results $R --records 4096x4096x4096_medium --repeat 15 \
      --out $L/medium_${v}_$i.json > $L/medium_${v}_$i.txt 2>&1
    echo "== $v $i"; tail -3 $L/medium_${v}_$i.txt
  done
done
rm -rf /tmp/res; cp -r results /tmp/res
$NEW timeout 120 python3 -m autotune search --size 4096 --precision medium --family wgmma_tf32 --results /tmp/res \
  --quiet > $L/search_medium_4096.txt 2>&1
tail -6 $L/search_medium_4096.txt
mkdir -p $OUT/results/nvidia-h100-80gb-hbm3; cp /tmp/res/nvidia-h100-80gb-hbm3/4096x4096x4096_medium.json $OUT/results/nvidia-h100-80gb-hbm3/
NCU="timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --launch-skip 3 --launch-count 2 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats"
P=$(python3 -c "
import json; d=json.load(open('results/nvidia-h100-80gb-hbm3/4096x16x4096.json')); print(json.dumps(d['families']['fewcols']['config']['params']))")
echo "fewcols $P" > $L/ncu_fewcols.txt
$NEW $NCU python3 benchmarks/profile_one.py fewcols "$P" 4096x16x4096 >> $L/ncu_fewcols.txt 2>&1
$NEW $NCU python3 benchmarks/profile_one.py cublas matmul 4096x16x4096 > $L/ncu_cublas_matmul.txt 2>&1
for f in $L/ncu_*.txt; do echo "== $f"; grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Grid Size|Block Size|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Theoretical Occupancy" $f | head -24; done
tar czf $OUT/logs.tar.gz -C $OUT logs results
