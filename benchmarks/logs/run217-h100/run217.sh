# Issue 16, 16 columns: colstage BULK (A's rows by cp.async.bulk, one lane a warp). Run 216: the
# 16-column record 30.8 us (2.19 TB/s; 2.2 needs 30.7). Prediction: BULK 30.0-30.5 us at 16
# columns (the A copies' instructions a warp-stage from about 45 to 15), 8 columns about 28.0.
# GPU test, probes (5 rounds), then colstage searched 60 s at 16 columns (seeds 0 and 1) and 8.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache217
L=$OUT/logs/run217-h100; mkdir -p $L/records $L/records_seed1
cp run217.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstage > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
P="python3 benchmarks/probe.py --repeat 5"
timeout 150 $P --records 4096x16x4096 --family colstage --variant "BULK=1" --variant "BULK=1 STAGES=5" \
  --variant "BULK=1 KSTAGE=256" --variant "BULK=1 KL=4 RPW=4" --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -6
timeout 100 $P --records 4096x8x4096 --family colstage --variant "BULK=1" --out $L/probe8.json > $L/probe8.txt 2>&1
grep -v rounds $L/probe8.txt | tail -3
timeout 100 python3 -m autotune search --sizes 4096x16x4096 --family colstage --timeout 60 --seed 0 --results $L/records > $L/search.txt 2>&1
timeout 100 python3 -m autotune search --sizes 4096x16x4096 --family colstage --timeout 60 --seed 1 --results $L/records_seed1 > $L/search_seed1.txt 2>&1
timeout 100 python3 -m autotune search --sizes 4096x8x4096 --family colstage --timeout 60 --seed 0 --results $L/records > $L/search8.txt 2>&1
grep -hE "^colstage|took" $L/search*.txt
rm -f $L/records*/*/optuna.db* $L/records*/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
