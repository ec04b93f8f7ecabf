# Issue 16: colstream's layouts test on the GPU: its fallback and first seed with pitched and
# unaligned operands (nn, nt), and every family in nt at the layouts test's shapes.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache208
L=$OUT/logs/run208-h100; mkdir -p $L
cp run208.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_layouts_gpu.py -k "colstream or (every_family and nt)" > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
