# Issue 16, few columns: colstage around run 214's 16-column winner (30.97 us, 2.18 TB/s: KL 2,
# RPW 2, 8 warps, KSTAGE 128, 4 stages, ROT), 5 rounds each; colstage searched again with seed 1
# at 16 and 8 columns (60 s) for the spread; then 30 s at the other few-column shapes of the small
# set (4096x32x4096, 4096x1x4096, 11008x1x4096), seed 0.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache215
L=$OUT/logs/run215-h100; mkdir -p $L/records $L/records_seed1
cp run215.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 benchmarks/probe.py --repeat 5 --records 4096x16x4096 \
  --params "colstage NR=16 KL=2 RPW=2 WARPS=8 KSTAGE=128 STAGES=4 KSPLIT=1 ROT=1" \
  --variant "STAGES=5" --variant "STAGES=6" --variant "WARPS=4" --variant "WARPS=16" --variant "KL=4 RPW=4" \
  --variant "ROT=0" --variant "KSTAGE=256" --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -9
timeout 200 python3 -m autotune search --sizes 4096x16x4096,4096x8x4096 --family colstage --timeout 60 --seed 1 --results $L/records_seed1 > $L/search_seed1.txt 2>&1
grep -vE "^\[" $L/search_seed1.txt | grep -E "^colstage|took"
timeout 200 python3 -m autotune search --sizes 4096x32x4096,4096x1x4096,11008x1x4096 --family colstage --timeout 30 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^colstage|took|cuBLAS"
rm -f $L/records*/*/optuna.db* $L/records*/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
