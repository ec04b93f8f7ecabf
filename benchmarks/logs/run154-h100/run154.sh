#!/usr/bin/env bash
# Run 154 (issue 16): where the launch-bound and memory-bound shapes of the small set lose time.
# The launch floor under the search's timer (launch_floor.py) beside the records at the tiny and
# 3000x1000 shapes; Nsight Compute's kernel durations there (kernel time against event interval);
# the tiny records with the whole of K in one tile (BK 64); Nsight Compute (full) of the 16-row
# and 16-column records (2.2 TB/s not reached there).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run154-h100; mkdir -p $L; cp run154.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT 2>/dev/null)" >> $L/gpu.txt
TINY=32x32x32,64x64x64,128x128x128,1x3000x1000,8x3000x1000,200x3000x1000
timeout 120 python3 benchmarks/launch_floor.py --shapes $TINY,256x256x256 --out $L/floor.json > $L/floor.txt 2>&1; cat $L/floor.txt
timeout 120 python3 benchmarks/probe.py --records $TINY --repeat 5 --out $L/probe_records.json > $L/probe_records.txt 2>&1; tail -8 $L/probe_records.txt
timeout 60 python3 benchmarks/probe.py --records 64x64x64,128x128x128 --set BK=64 --repeat 5 --out $L/probe_bk64.json > $L/probe_bk64.txt 2>&1; tail -5 $L/probe_bk64.txt
rec() { python3 -c "
import json
d=json.load(open('results/nvidia-h100-80gb-hbm3/$1.json'))
f,e=max(((f,e) for f,e in d['families'].items() if e['status']=='ok'), key=lambda kv: kv[1]['ratio'])
print(f); print(json.dumps(e['config']['params']))"; }
DUR="timeout 60 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --launch-skip 2 --launch-count 6 --metrics gpu__time_duration.sum"
for r in ${TINY//,/ }; do
  mapfile -t fp < <(rec $r)
  echo "== $r ${fp[0]} ${fp[1]}" >> $L/durations.txt
  $DUR python3 benchmarks/profile_one.py "${fp[0]}" "${fp[1]}" $r 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time_duration" >> $L/durations.txt
  echo "== $r cublas" >> $L/durations.txt
  $DUR python3 benchmarks/profile_one.py cublas matmul $r 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time_duration" >> $L/durations.txt
done
cat $L/durations.txt | head -150
NCU="timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --launch-skip 3 --launch-count 1"
for r in 16x4096x4096 4096x16x4096 8x4096x4096 4096x8x4096; do
  mapfile -t fp < <(rec $r)
  echo "== $r: ${fp[0]} ${fp[1]}" | tee -a $L/summary.txt
  $NCU python3 benchmarks/profile_one.py "${fp[0]}" "${fp[1]}" $r > $L/ncu_$r.txt 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Bank|Block Limit|Waves Per SM|Grid Size|Block Size|'time_ms'" $L/ncu_$r.txt | head -60 >> $L/summary.txt
done
cat $L/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
