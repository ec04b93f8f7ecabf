# Issue 16, the few-column side: is warptile's transposing 4-byte copy of A (nn) what makes
# 4096x{8,16,32}x4096 25-50% slower than their mirrors 8-32x4096x4096 (where B, streamed, goes by
# 16-byte copies)? In tn (A stored K x M) the same kernel copies A by 16-byte copies into the same
# shared layout: (1) warptile's nn records, and a 16-column tile mirrored from the 16-row record,
# timed in nn and tn, 3 rounds each against cuBLAS in that layout; (2) warptile searched 45 s a
# shape (seed 0, BN from 16) in tn and in nn at 8, 16, 32 columns.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache187
L=$OUT/logs/run187-h100; mkdir -p $L
cp run187.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
P="timeout 80 python3 benchmarks/probe.py --family warptile --repeat 3"
MIRROR="--set BM=64 --set BN=16 --set BK=16 --set WARPS_M=2 --set WARPS_N=1 --set LANES_N=4 --set TM=4 --set TN=4 --set SPLITK=4 --set MINB=4 --set STAGES=7 --set SCHEDULE=data_parallel --set PREFETCH=0 --set MMA_ORDER=1 --set GROUP_M=8"
{
$P --records 4096x32x4096 --shapes 4096x32x4096,4096x32x4096_tn
$P --records 32x4096x4096 --shapes 32x4096x4096
$P --records 4096x16x4096 --shapes 4096x16x4096,4096x16x4096_tn,4096x8x4096,4096x8x4096_tn $MIRROR
$P --records 16x4096x4096 --shapes 16x4096x4096,8x4096x4096
} > $L/probe.txt 2>&1
grep -vE "^\[" $L/probe.txt | grep -E "rounds|record|BM=|geometric"
mkdir -p /tmp/res187
for lay in tn nn; do
  timeout 200 python3 -m autotune search --sizes 4096x8x4096_$lay,4096x16x4096_$lay,4096x32x4096_$lay --family warptile \
    --config benchmarks/spaces/warptile_16.yaml --timeout 45 --seed 0 --results /tmp/res187 > $L/search_$lay.txt 2>&1
  grep -vE "^\[" $L/search_$lay.txt | grep -E "^[a-z0-9_]+ +[0-9]|took|wrote|cuBLAS [0-9]|x cuBLAS"
done
mkdir -p $L/records; cp /tmp/res187/nvidia-h100-80gb-hbm3/*.json $L/records/ 2>/dev/null
tar czf $OUT/logs.tar.gz -C $OUT logs
