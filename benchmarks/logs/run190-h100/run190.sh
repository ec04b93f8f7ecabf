# Issue 16: (1) warptile at 4096x32x4096 searched with A_ROWS and 64-deep k-tiles (run 189's search
# of it was cut by the script's limit), 90 s, seed 1, into a copy of results/; (2) the GPU tests of
# every family at the awkward shapes (A_ROWS configs among them) and A_ROWS's pitched-A test.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache190
L=$OUT/logs/run190-h100; mkdir -p $L
cp run190.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
timeout 170 python3 -m autotune search --sizes 4096x32x4096 --family warptile --config benchmarks/spaces/warptile_a_rows.yaml \
    --timeout 90 --seed 1 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9_]+ +[0-9]|took|wrote|cuBLAS [0-9]|x cuBLAS"
mkdir -p $L/records; cp /tmp/resc/nvidia-h100-80gb-hbm3/4096x32x4096.json $L/records/
timeout 330 python3 -m pytest -q -p no:cacheprovider -n 14 -rf tests/gpu/test_correctness.py -k "all_families" tests/gpu/test_layouts_gpu.py::test_a_kept_as_stored_reads_nothing_past_k > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
