# Issue 16: the GPU tests on the code as committed (colstage with PIN, its seeds now the searches'
# winners): colstage's and colstream's correctness, every family at the awkward shapes (seeds and
# random valid points) and in each layout, the example program with colstage's exported header.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache221
L=$OUT/logs/run221-h100; mkdir -p $L
cp run221.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py tests/gpu/test_layouts_gpu.py \
  -k "colstage or colstream or all_families or every_family" > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
