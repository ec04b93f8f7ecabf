# Issue 16: run 191 again on 940ec5d (run 191 found random A_ROWS points with no tn or tt form): the GPU tests that A_ROWS touches in the other layouts: every family in every layout it
# reads at the awkward shapes (the A_ROWS configs among warptile's, built for nt; in tn and tt
# built_for sets A_ROWS back to 0), and A_ROWS's pitched-A test (NaN past K).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache192
L=$OUT/logs/run192-h100; mkdir -p $L
cp run192.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 570 python3 -m pytest -q -p no:cacheprovider -n 14 -rf tests/gpu/test_layouts_gpu.py -k "every_family or a_kept" > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
