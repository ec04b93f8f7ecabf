# Issue 16: the tiny family's GPU tests (its own, every layout and batches among every family's),
# then tiny searched again at 64^3 and 32^3 (40 s each, seed 1) with run 183's winners as seeds.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache184
L=$OUT/logs/run184-h100; mkdir -p $L
cp run184.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 14 -rf tests/gpu/test_correctness.py::test_tiny_correct tests/gpu/test_layouts_gpu.py tests/gpu/test_batches_gpu.py > $L/gpu_tests.txt 2>&1
tail -6 $L/gpu_tests.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
timeout 120 python3 -m autotune search --sizes 64x64x64,32x32x32 --family tiny --timeout 40 --seed 1 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"
mkdir -p $L/records; for s in 32x32x32 64x64x64; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
