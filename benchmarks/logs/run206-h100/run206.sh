# Issue 16: the GPU tests on the code as committed with the colstream family: every strict-FP32
# family at the awkward shapes (colstream's seeds and random points among them) and colstream's
# own test (one and several blocks along K, tails, 4-byte paths, nn and nt).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache206
L=$OUT/logs/run206-h100; mkdir -p $L
cp run206.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 540 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k "all_families or colstream" > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
