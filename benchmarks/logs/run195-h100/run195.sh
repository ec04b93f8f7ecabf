# Issue 16: the GPU tests of the split-K epilogue's 16-byte atomics (the code as committed):
# every family at the awkward shapes (warptile's split-K variants, N % 4 != 0 among them) and the
# stream-K / split-launch tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache195
L=$OUT/logs/run195-h100; mkdir -p $L
cp run195.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 400 python3 -m pytest -q -p no:cacheprovider -n 14 -rf tests/gpu/test_correctness.py tests/gpu/test_streamk.py -k "all_families or stream_k or split_launch" > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
