# Issue 16, few columns: the prototype of run 201 timed again by the search's runner (run 201's
# own timer let the host's launch overhead into the interval), with longer stages (S 4: 2 KB of a
# row a stage) and more of A in flight. Prediction: 30-33 us at 8 columns if the 1-column read
# carries over; the records 32.4-33.4 us.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache202
L=$OUT/logs/run202-h100; mkdir -p $L
cp run202.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 300 python3 benchmarks/along_k_proto.py --out $L/proto.json > $L/proto.txt 2>&1
cat $L/proto.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
