# Issue 16, 16 columns: colstream with A_RING (A's stages copied by cp.async into a ring of
# shared memory beside B's; no registers hold the bytes in flight). Prediction: the best variant
# at 4096x16x4096 30-32 us (colstream's stored entry 35.2 us, warptile's record 33.2); 8 columns
# 29-30 us (record 30.2). Its GPU test first, then variants of the stored colstream entries
# (probe.py --variant, 3 rounds), then colstream searched 60 s at 16 and 8 columns (seed 0).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache209
L=$OUT/logs/run209-h100; mkdir -p $L/records
cp run209.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstream > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 200 python3 benchmarks/probe.py --records 4096x16x4096 --family colstream --repeat 3 \
  --variant "A_RING=1 STAGES=3" --variant "A_RING=1 STAGES=4" \
  --variant "A_RING=1 RPW=8 WARPS=4 STAGES=3" --variant "A_RING=1 RPW=8 WARPS=4 STAGES=4" \
  --variant "A_RING=1 S=1 STAGES=6" --variant "A_RING=1 RPW=8 WARPS=4 S=1 STAGES=6" \
  --variant "A_RING=1 RPW=4 WARPS=4 STAGES=3" --variant "A_RING=1 RPW=2 WARPS=8 STAGES=3" \
  --variant "A_RING=1 RPW=8 WARPS=4 STAGES=4 KSPLIT=2" \
  --out $L/probe16.json > $L/probe16.txt 2>&1
tail -14 $L/probe16.txt
timeout 120 python3 benchmarks/probe.py --records 4096x8x4096 --family colstream --repeat 3 \
  --variant "A_RING=1 S=2 STAGES=3" --variant "A_RING=1 S=2 STAGES=4" \
  --variant "A_RING=1 RPW=8 WARPS=4 S=2 STAGES=3" --variant "A_RING=1 S=1 STAGES=6" \
  --out $L/probe8.json > $L/probe8.txt 2>&1
tail -7 $L/probe8.txt
timeout 240 python3 -m autotune search --sizes 4096x16x4096,4096x8x4096 --family colstream --timeout 60 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | tail -14
tar czf $OUT/logs.tar.gz -C $OUT logs
