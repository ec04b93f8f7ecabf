# Issue 16, few columns. The A_ROWS kernels' register count was set by their 4-byte fallback
# (unrolled: an address per element held; the 64 x 16 record 184 registers, 112 rolled up:
# unroll.patch). Prediction: the record itself within 3% (its copy pattern, 64 rows x 128 B a
# stage, ran as fast as the record in run 199), larger stages (BK 64-128, 128 rows) now without
# spills nearer the best copy patterns (30-31.6 us at K 4096). Each at K 4096 and 16384 (the
# slope: the streaming rate), 3 rounds, in one process; the record before the patch first.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache200
L=$OUT/logs/run200-h100; mkdir -p $L
cp run200.sh unroll.patch $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
P="timeout 250 python3 benchmarks/probe.py --repeat 3 --family warptile"
patch -R -p1 < unroll.patch > /dev/null
for n in 16 8; do
  $P --records 4096x${n}x4096 --shapes 4096x${n}x4096,4096x${n}x16384 --out $L/before_$n.json > $L/before_$n.txt 2>&1
done
patch -p1 < unroll.patch > /dev/null
grep -vE "^\[" $L/before_*.txt | grep -v rounds
V=(--variant "BK=64" --variant "BK=64 STAGES=3" --variant "BM=128 WARPS_M=4 BK=64"
   --variant "BM=128 WARPS_M=4 BK=64 STAGES=3 MINB=1" --variant "BM=128 WARPS_M=4 BK=32 STAGES=3"
   --variant "BK=128" --variant "BM=32 WARPS_M=1 BK=128 STAGES=3"
   --variant "BM=128 WARPS_M=4 BK=64 SCHEDULE=data_parallel SPLITK=4 STAGES=3 MINB=1"
   --variant "BK=64 SCHEDULE=data_parallel SPLITK=8" --variant "LANES_N=2 TN=8 BM=128 BK=64")
for n in 16 8; do
  $P --records 4096x${n}x4096 --shapes 4096x${n}x4096,4096x${n}x16384 "${V[@]}" --out $L/after_$n.json > $L/after_$n.txt 2>&1
  grep -vE "^\[" $L/after_$n.txt | grep -v rounds
done
tar czf $OUT/logs.tar.gz -C $OUT logs
