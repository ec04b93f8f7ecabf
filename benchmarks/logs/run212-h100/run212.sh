# Issue 16, 16 columns: the colstage family (templates/colstage.cu.j2): its GPU test, then its
# seeds and variants timed at 4096 x {16, 8, 32} x 4096 (probe.py --params, 3 rounds), then
# colstage searched 60 s at 16 and 8 columns (seed 0). Prediction: the best at 16 columns 30-31.5
# us (warptile's record 33.2, colstream 35.0-35.3, run 209), 8 columns about 30 us (record 30.2).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache212
L=$OUT/logs/run212-h100; mkdir -p $L/records
cp run212.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstage > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
P="python3 benchmarks/probe.py --repeat 3"
timeout 200 $P --records 4096x16x4096 --params "colstage NR=16 KL=4 RPW=4 WARPS=16 KSTAGE=256 STAGES=3 KSPLIT=1" \
  --variant "STAGES=4" --variant "KL=2 RPW=2" --variant "KL=1 RPW=1" --variant "KL=8 RPW=4 WARPS=8" \
  --variant "WARPS=8 STAGES=4" --variant "KL=8 RPW=8 WARPS=8" --variant "KSTAGE=512 STAGES=2" \
  --variant "KSTAGE=128 WARPS=8 STAGES=4" --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -12
timeout 100 $P --records 4096x8x4096 --params "colstage NR=8 KL=4 RPW=4 WARPS=16 KSTAGE=256 STAGES=3 KSPLIT=1" \
  --variant "KL=2 RPW=2" --variant "KL=8 RPW=8 WARPS=8" --variant "STAGES=4" --out $L/probe8.json > $L/probe8.txt 2>&1
grep -v rounds $L/probe8.txt | tail -6
timeout 100 $P --records 4096x32x4096 --params "colstage NR=32 KL=2 RPW=2 WARPS=16 KSTAGE=256 STAGES=3 KSPLIT=1" \
  --variant "KL=4 RPW=4 WARPS=8" --variant "KL=1 RPW=1" --out $L/probe32.json > $L/probe32.txt 2>&1
grep -v rounds $L/probe32.txt | tail -5
timeout 240 python3 -m autotune search --sizes 4096x16x4096,4096x8x4096 --family colstage --timeout 60 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | tail -14
rm -f $L/records/*/optuna.db* $L/records/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
