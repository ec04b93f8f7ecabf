# Issue 16, few columns: do blocks that keep their rows and walk along them (the few-columns
# kernels) stream slower than blocks that walk down columns (the few-rows kernels), and does it
# help when a row group's blocks read neighbouring pieces at the same time (interleaved) instead
# of each its own chunk of K? Pure copies (stream_pattern.py --cases walks) at K = 4096 and 16384.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=$OUT/logs/run199-h100; mkdir -p $L
cp run199.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
for k in 4096 16384; do
  timeout 120 python3 benchmarks/stream_pattern.py --cases walks --k $k --out $L/walks_k$k.json > $L/walks_k$k.txt 2>&1
  cat $L/walks_k$k.txt
done
tar czf $OUT/logs.tar.gz -C $OUT logs
