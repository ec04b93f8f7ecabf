# Issue 16, the few-column side (4096 x {8,16} x 4096 at 2.04 TB/s, goal 2.2): where the A_ROWS
# record's 33 us go. (1) Its time against K (1024-16384) beside the rows-side record's and
# cuBLAS's: the slope is the streaming rate, the intercept the fixed cost. (2) The record's
# parameters varied one or two at a time (stages, BK 64, MINB, the schedule), 3 rounds each, in
# one process. (3) Nsight Compute of the record (its own clocks).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache197
L=$OUT/logs/run197-h100; mkdir -p $L
cp run197.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
P="timeout 200 python3 benchmarks/probe.py --repeat 3"
$P --records 4096x16x4096 --family warptile --shapes 4096x16x1024,4096x16x2048,4096x16x4096,4096x16x8192,4096x16x16384 --out $L/k_cols.json > $L/k_cols.txt 2>&1
$P --records 16x4096x4096 --family warptile --shapes 16x4096x1024,16x4096x2048,16x4096x4096,16x4096x8192,16x4096x16384 --out $L/k_rows.json > $L/k_rows.txt 2>&1
grep -vE "^\[" $L/k_cols.txt $L/k_rows.txt | grep -v rounds
V=(--variant "STAGES=3" --variant "STAGES=4" --variant "BK=64" --variant "BK=64 STAGES=3"
   --variant "BK=16 STAGES=4" --variant "MINB=2" --variant "BM=32 WARPS_M=1" --variant "BM=32 WARPS_M=1 BK=64 STAGES=3"
   --variant "SCHEDULE=data_parallel SPLITK=8" --variant "SCHEDULE=data_parallel SPLITK=16"
   --variant "SCHEDULE=stream_k" --variant "SCHEDULE=split_persistent" --variant "MMA_ORDER=0" --variant "PREFETCH=1")
$P --records 4096x16x4096,4096x8x4096 --family warptile "${V[@]}" --out $L/variants.json > $L/variants.txt 2>&1
grep -vE "^\[" $L/variants.txt | tail -70
timeout 100 python3 benchmarks/stream_pattern.py --k 8192 --out $L/stream_pattern_k8192.json > $L/stream_pattern_k8192.txt 2>&1
tail -20 $L/stream_pattern_k8192.txt
CFG=$(python3 -c "
import json; d=json.load(open('results/nvidia-h100-80gb-hbm3/4096x16x4096.json'))
print(json.dumps(d['families']['warptile']['config']['params']))")
timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --launch-skip 3 --launch-count 1 \
  python3 benchmarks/profile_one.py warptile "$CFG" 4096x16x4096 > $L/ncu_4096x16x4096.txt 2>&1
grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Bank|Block Limit|Waves Per SM|Grid Size|Block Size|'time_ms'" $L/ncu_4096x16x4096.txt | head -60 > $L/summary.txt
cat $L/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
