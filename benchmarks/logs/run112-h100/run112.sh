set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs/run112-h100; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
# 1. correctness: every family at the awkward shapes in every layout (PACKB 2 configs among them)
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/gpu/test_correctness.py tests/gpu/test_layouts_gpu.py -k "not example" > $L/gpu_tests.txt 2>&1; tail -3 $L/gpu_tests.txt
# 2. the nn/tn records and the nt/tt records, in place (record) and with B transposed first (PACKB=2)
for r in 4096x4096x4096 8192x8192x1024; do
  python3 benchmarks/probe.py --records $r --shapes ${r},${r}_nt,${r}_tn,${r}_tt --set PACKB=2 --out $L/probe_${r}.json > $L/probe_${r}.txt 2>&1; cat $L/probe_${r}.txt
done
python3 benchmarks/probe.py --records 4096x4096x4096_nt,4096x4096x4096_tt,8192x8192x1024_nt,8192x8192x1024_tt --set PACKB=2 --out $L/probe_layout_records.json > $L/probe_layout_records.txt 2>&1; cat $L/probe_layout_records.txt
# 3. default warptile searches (seeds, 30 trials) at the four nt / tt shapes, fresh results folder
mkdir -p /tmp/res
for lay in nt tt; do
  for s in "--size 4096" "--m 8192 --n 8192 --k 1024"; do
    f=$L/search_$(echo $s | tr -d ' -')_$lay.txt
    /usr/bin/time -f "%e s wall" python3 -m autotune search $s --layout $lay --family warptile --results /tmp/res > $f 2>&1; tail -4 $f
  done
done
cp -r /tmp/res $L/results
tar czf $OUT/logs.tar.gz -C $OUT logs
