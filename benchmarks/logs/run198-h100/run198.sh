# Issue 16, few columns: run 197 found the A_ROWS record streaming at 2.65 TB/s (its time against
# K: 50.8 us more from K 8192 to 16384) where the rows side's record and the pure reads in runs of
# 256 B or more a row stream at 3.1 TB/s, the fixed cost about the same (8-9 us). Here each
# candidate structure at K = 4096 and 16384, 3 rounds each: its slope. Then Nsight Compute of the
# record and of the rows side's record (the SGEMM kernel, not the spin kernel before it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache198
L=$OUT/logs/run198-h100; mkdir -p $L
cp run198.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
P="timeout 240 python3 benchmarks/probe.py --repeat 3"
$P --records 4096x16x4096 --family warptile --shapes 4096x16x4096,4096x16x16384 \
   --variant "BK=64" --variant "BK=64 MINB=1" --variant "BK=64 SCHEDULE=data_parallel SPLITK=8" \
   --variant "BK=64 SCHEDULE=data_parallel SPLITK=4 STAGES=3" --variant "SCHEDULE=data_parallel SPLITK=8" \
   --variant "BK=16 STAGES=2" \
   --out $L/slope_warptile.json > $L/slope_warptile.txt 2>&1
grep -vE "^\[" $L/slope_warptile.txt | grep -v rounds
for n in 16 8; do
$P --records 4096x${n}x4096 --family fewcols --shapes 4096x${n}x4096,4096x${n}x16384 \
   --variant "RPW=1 UNROLL=2" --variant "RPW=1 WK=4 UNROLL=4" \
   --out $L/slope_fewcols_$n.json > $L/slope_fewcols_$n.txt 2>&1
grep -vE "^\[" $L/slope_fewcols_$n.txt | grep -v rounds
done
N="timeout 120 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --kernel-name autotune_sgemm --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
for r in 4096x16x4096 16x4096x4096; do
  CFG=$(python3 -c "
import json; d=json.load(open('results/nvidia-h100-80gb-hbm3/$r.json'))
print(json.dumps(d['families']['warptile']['config']['params']))")
  $N python3 benchmarks/profile_one.py warptile "$CFG" $r > $L/ncu_$r.txt 2>&1
  echo "== $r" >> $L/summary.txt
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Block Limit|Grid Size|Block Size|Theoretical Occ|Eligible Warps|Active Warps" $L/ncu_$r.txt | head -40 >> $L/summary.txt
done
cat $L/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
