# Issue 16: every record of the small set (sweep.py --set small, 29 shapes) re-timed in one process,
# each right after cuBLAS at its shape, 3 rounds: the set's geometric mean with its spread, on the
# code as committed (the records' own figures each come from the process that searched it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache196
L=$OUT/logs/run196-h100; mkdir -p $L
cp run196.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 500 python3 benchmarks/probe.py --records small --repeat 3 --out $L/probe_small.json > $L/probe_small.txt 2>&1
grep -vE "^\[" $L/probe_small.txt | grep -E "rounds|geometric" | tail -32
tar czf $OUT/logs.tar.gz -C $OUT logs
