# Issue 16, 16 columns: colstage MINB (__launch_bounds__ with 2 blocks an SM), so blocks of 16 or
# 8 rows can share an SM (256-512 blocks: all 132 SMs at work, where 128 blocks of 32 rows leave 4
# idle). Run 215-218: 30.8-31.1 us with 32-row blocks; 2.2 TB/s is 30.7. Prediction: 16-row blocks
# 30.0-31.0 us. GPU test, probes (5 rounds), then colstage searched 90 s at 16 columns (seed 0).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache219
L=$OUT/logs/run219-h100; mkdir -p $L/records
cp run219.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstage > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 200 python3 benchmarks/probe.py --repeat 5 --records 4096x16x4096 --family colstage \
  --variant "KL=4 RPW=2 MINB=2" --variant "KL=2 RPW=1 MINB=2" --variant "KL=4 RPW=2 WARPS=4 MINB=2" \
  --variant "KL=4 RPW=1 WARPS=4 MINB=2" --variant "KL=8 RPW=4 KSTAGE=256 MINB=2" --variant "KL=4 RPW=2 STAGES=3 MINB=2" \
  --variant "KL=4 RPW=2 WARPS=4 STAGES=3 MINB=2" --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -9
timeout 150 python3 -m autotune search --sizes 4096x16x4096 --family colstage --timeout 90 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -hE "^colstage|took" $L/search.txt
rm -f $L/records*/*/optuna.db* $L/records*/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
