python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run114-h200; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
python3 benchmarks/cold_search.py --shapes 4096,8192x8192x1024 --seeds 0,1,2 --family warptile --stored results/nvidia-h200 \
  --out $L/cold > $L/cold.txt 2>&1
cat $L/cold.txt
rm -rf $L/cold/work
tar czf $OUT/logs.tar.gz -C $OUT logs
