python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run117-h100; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 540 python3 -m pytest -q -p no:cacheprovider tests/gpu -m gpu > $L/gpu_tests.txt 2>&1
echo "rc=$?" >> $L/gpu_tests.txt
tail -15 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
