# Issue 16: colstream elsewhere. (1) 16 columns as two groups of 8 (grid z): the 8-column record's
# kernel and lighter ones (123-128 registers: two blocks an SM, so both groups of a row block run
# at once and the second read of A comes from L2). Prediction: 32-34 us, no better than warptile's
# 33.2. (2) colstream searched 30 s at the other few-column shapes of the small set (1 column:
# 4096 and 11008 rows; 32 columns), where it now enters a search over all families.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache207
L=$OUT/logs/run207-h100; mkdir -p $L/records
cp run207.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 120 python3 benchmarks/probe.py --records 4096x8x4096 --family colstream --shapes 4096x16x4096 --repeat 3 \
  --variant "RPW=2 S=2 STAGES=3" --variant "RPW=2 S=2 STAGES=3 WARPS=4" --variant "RPW=1 S=4 STAGES=3" \
  --out $L/probe_16.json > $L/probe_16.txt 2>&1
grep -vE "^\[" $L/probe_16.txt | grep -v rounds
timeout 200 python3 -m autotune search --sizes 4096x1x4096,11008x1x4096,4096x32x4096 --family colstream --timeout 30 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "colstream|cuBLAS"
rm -f $L/records/*/optuna.db* $L/records/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
