# Issue 16: where the few-columns kernels' time goes. Nsight Compute (full set, clocks as found)
# of fewcols with B through the ring: the 4096x16x4096 record (1.32x) and run 170's best at
# 4096x32x4096 (0.97x, behind warptile's 1.09x record), with the kernel durations of each
# launch (the record's scale-C launch included) and cuBLAS's.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache173
L=$OUT/logs/run173-h100; mkdir -p $L
cp run173.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
P16=$(python3 -c "import json; d=json.load(open('results/nvidia-h100-80gb-hbm3/4096x16x4096.json')); print(json.dumps(d['families']['fewcols']['config']['params']))")
P32='{"A_STAGES": 3, "B_RING": 1, "KCHUNK": 512, "LANE_ROWS": 1, "NR": 32, "REDUCE": "atomic", "RPW": 2, "STREAM": 0, "UNROLL": 2, "WARPS": 2, "WK": 2}'
DUR="timeout 60 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --launch-skip 2 --launch-count 6 --metrics gpu__time_duration.sum"
NCU="timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --kernel-name autotune_sgemm --launch-skip 3 --launch-count 1"
for case in "4096x16x4096|$P16" "4096x32x4096|$P32"; do
  s=${case%%|*}; p=${case#*|}
  echo "== $s fewcols $p" | tee -a $L/summary.txt
  $DUR python3 benchmarks/profile_one.py fewcols "$p" $s 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time_duration" >> $L/durations.txt
  echo "== $s cublas" >> $L/durations.txt
  $DUR python3 benchmarks/profile_one.py cublas matmul $s 2>&1 | grep -E "^  [a-zA-Z_]|gpu__time_duration" >> $L/durations.txt
  $NCU python3 benchmarks/profile_one.py fewcols "$p" $s > $L/ncu_$s.txt 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Bank|Block Limit|Waves Per SM|Grid Size|Block Size|Dynamic Shared" $L/ncu_$s.txt | head -70 >> $L/summary.txt
done
cat $L/durations.txt | head -60; cat $L/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
