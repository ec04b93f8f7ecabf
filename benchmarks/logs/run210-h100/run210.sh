# Issue 16, 16 columns: where colstream's time goes. Nsight Compute (--set full, one launch each)
# of colstream's 8-column record, its 16-column entry (A in registers), and A_RING at 16 columns
# with 8 warps of 4 rows (4 stages) and 4 warps of 8 rows (3 stages). Run 209: A_RING did not
# help (35.3-48 us against 35.0), so the bytes of A in flight were not the limit.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache210
L=$OUT/logs/run210-h100; mkdir -p $L
cp run210.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
NCU="timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --kernel-name autotune_sgemm --launch-skip 1 --launch-count 1"
B='"BATCHED": 0, "KSPLIT": 1, "TRANS_A": 0, "TRANS_B": 0'
run() {
  $NCU python3 benchmarks/profile_one.py colstream "{$B, $2}" $3 > $L/ncu_$1.txt 2>&1
  echo "== $1 $2 $3" >> $L/summary.txt
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Bank|Shared|Pipe|pipe|MIO|LSU|FMA|Barrier|Block Limit|'time_ms'" $L/ncu_$1.txt | head -80 >> $L/summary.txt
}
run c8 '"A_RING": 0, "NR": 8, "RPW": 4, "S": 4, "STAGES": 2, "WARPS": 8' 4096x8x4096
run c16 '"A_RING": 0, "NR": 16, "RPW": 4, "S": 2, "STAGES": 2, "WARPS": 8' 4096x16x4096
run r16 '"A_RING": 1, "NR": 16, "RPW": 4, "S": 2, "STAGES": 4, "WARPS": 8' 4096x16x4096
run r16w4 '"A_RING": 1, "NR": 16, "RPW": 8, "S": 2, "STAGES": 3, "WARPS": 4' 4096x16x4096
cat $L/summary.txt | head -50
tar czf $OUT/logs.tar.gz -C $OUT logs
