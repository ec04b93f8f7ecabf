# Issue 16, few columns: colstream with LR row groups a warp (lanes of a group share B's reads:
# 2 or 1 shared-memory passes a 16-byte read instead of 4). Prediction: 16 columns from 35.2 us
# (LR 1, run 203) to 31-32 us with LR 2 or 4; 8 columns unchanged (LR 1 as before, the code
# re-measured: its source changed). GPU test; the stored entries with LR variants; colstream
# searched at 4096 x {16, 8} x 4096 (75 and 45 s, seed 2).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache205
L=$OUT/logs/run205-h100; mkdir -p $L/records
cp run205.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstream > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
for n in 16 8; do
  timeout 150 python3 benchmarks/probe.py --records 4096x${n}x4096 --family colstream --repeat 3 \
    --variant "LR=2 S=1" --variant "LR=2 S=2" --variant "LR=4 S=1" --variant "LR=2 RPW=2 S=2" --variant "LR=4 RPW=2 S=1" --variant "LR=2 S=1 WARPS=4" \
    --out $L/probe_$n.json > $L/probe_$n.txt 2>&1
  grep -vE "^\[" $L/probe_$n.txt | grep -v rounds
done
timeout 120 python3 -m autotune search --sizes 4096x16x4096 --family colstream --timeout 75 --seed 2 --results $L/records > $L/search16.txt 2>&1
timeout 90 python3 -m autotune search --sizes 4096x8x4096 --family colstream --timeout 45 --seed 2 --results $L/records > $L/search8.txt 2>&1
grep -vE "^\[" $L/search16.txt $L/search8.txt | grep -E "colstream|cuBLAS"
tar czf $OUT/logs.tar.gz -C $OUT logs
