# Issue 16, few columns: a prototype (benchmarks/along_k_proto.py) with the 1-column kernel's read
# of A (warps along rows, 512 B a load: 27.7 us at 4096x1x4096) and B's rows through a cp.async
# ring. Prediction: at 8 and 16 columns within 10% of the 1-column record's time, so 29-31 us
# where the records take 32.4-33.4. The records (and the 1-column one) re-timed in the same run.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache201
L=$OUT/logs/run201-h100; mkdir -p $L
cp run201.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 benchmarks/along_k_proto.py --out $L/proto.json > $L/proto.txt 2>&1
cat $L/proto.txt
timeout 150 python3 benchmarks/probe.py --records 4096x1x4096,4096x8x4096,4096x16x4096 --repeat 3 --out $L/records.json > $L/records.txt 2>&1
grep -vE "^\[" $L/records.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
