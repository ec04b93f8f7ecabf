# Issue 16: colstage on the code as committed. GPU tests: colstage's and colstream's correctness,
# every family at the awkward shapes and in each layout, the example program with colstage's
# exported header (nn, nt); then every record of the small set re-timed in one process, each right
# after cuBLAS at its shape (probe.py --records small --repeat 3), as run 196 did before colstage.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache216
L=$OUT/logs/run216-h100; mkdir -p $L
cp run216.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py tests/gpu/test_layouts_gpu.py \
  -k "colstage or colstream or all_families or every_family" > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 260 python3 benchmarks/probe.py --records small --repeat 3 --out $L/probe_small.json > $L/probe_small.txt 2>&1
grep -E "rounds|geometric" $L/probe_small.txt | tail -3
tar czf $OUT/logs.tar.gz -C $OUT logs
