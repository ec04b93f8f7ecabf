# Issue 16: the tiny family (a small tile a block, all of K in shared memory at once, KS groups of
# threads along K). (1) tiny searched 45 s a shape (seed 0) at 32^3, 64^3, 128^3; (2) the records
# before and the new best entries, 5 rounds each against cuBLAS; (3) the GPU tests of every family at
# the awkward shapes (tiny's seeds and random points among them).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache183
L=$OUT/logs/run183-h100; mkdir -p $L
cp run183.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
timeout 200 python3 -m autotune search --sizes 32x32x32,64x64x64,128x128x128 --family tiny --timeout 45 --seed 0 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"
S=32x32x32,64x64x64,128x128x128
timeout 60 python3 benchmarks/probe.py --records $S --repeat 5 > $L/probe_before.txt 2>&1
timeout 60 python3 benchmarks/probe.py --records $S --repeat 5 --results /tmp/resc > $L/probe_after.txt 2>&1
grep -vE "^\[" $L/probe_before.txt $L/probe_after.txt | grep -E "rounds|record"
mkdir -p $L/records; for s in 32x32x32 64x64x64 128x128x128; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 14 -rf tests/gpu/test_correctness.py -k "all_families" > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
