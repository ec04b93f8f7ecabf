# Issue 16: run 173 had the 4096x16x4096 record's kernel at 30.7 us (2.21 TB/s) and the launch
# that scales C before its atomics at 3.1 us more. The two fewcols records with the chunks'
# sums met by the last block instead (REDUCE=last_block: no second launch), re-timed against
# cuBLAS in one process, 5 rounds alternating.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache174
L=$OUT/logs/run174-h100; mkdir -p $L
cp run174.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 benchmarks/probe.py --records 4096x16x4096,4096x8x4096 --set REDUCE=last_block --repeat 5 --out $L/probe.json > $L/probe.txt 2>&1
cat $L/probe.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
