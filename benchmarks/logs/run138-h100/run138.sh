#!/usr/bin/env bash
# Run 138 (issue 17): where 777^3's 10 us over 776^3 goes, for the model's choice there (the
# 200x3000x1000 record): A unaligned alone (777x780x777), N unaligned alone (780x777x780), and
# Nsight Compute's duration of each kernel of one call at 777^3 and 780^3.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atc PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run138-h100; mkdir -p $L; cp run138.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 60 python3 benchmarks/probe.py --records 200x3000x1000 --repeat 3 \
  --shapes 777,780,777x780x777,780x777x780,780x780x777,777x777x780 --out $L/align.json > $L/align.txt 2>&1
grep -v rounds $L/align.txt
P=$(python3 -c "
import json; d=json.load(open('results/nvidia-h100-80gb-hbm3/200x3000x1000.json')); print(json.dumps(d['families']['warptile']['config']['params']))")
for s in 777 780 780x777x780; do
  timeout 60 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --cache-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread \
    python3 benchmarks/profile_one.py warptile "$P" $s > $L/ncu_$s.txt 2>&1
  echo "== $s"; grep -E "autotune_sgemm|duration|bytes|grid_size|registers" $L/ncu_$s.txt | tail -24
done
tar czf $OUT/logs.tar.gz -C $OUT logs
