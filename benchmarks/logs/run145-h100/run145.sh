set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run145-h100; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 330 python3 benchmarks/vs_kernel_tuner.py --family vectorized --size 4096 --fevals 20 --repeats 1 \
  --strategies random_sample,hybrid_vndx --out $L/kt_vectorized.json > $L/kt_vectorized.txt 2>&1
echo "rc $?"; tail -9 $L/kt_vectorized.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
