python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs/run118-h100; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
# The default search (all families, seeds, 30 trials each), fresh results folder and compile cache
for lay in nn nt; do
  /usr/bin/time -f "%e s wall" python3 -m autotune search --size 4096 --layout $lay --results /tmp/res_$lay --quiet > $L/search_4096_$lay.txt 2>&1
  tail -9 $L/search_4096_$lay.txt
done
tar czf $OUT/logs.tar.gz -C $OUT logs
