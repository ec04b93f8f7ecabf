# Issue 16, 16 columns: colstage PIN (the copies' pointers pinned in registers; ptxas recomputed
# them every stage). Run 214's count: 13.6 M instructions for 8.4 M FMAs, about 1.8 M of them the
# stages' setup. Prediction: 16 columns 30.0-30.5 us (from 30.7-31.1), 8 columns 28.0-28.3. GPU
# test, probes (5 rounds), then colstage searched 60 s at 16 columns (seeds 0, 1) and 8 (seed 0).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache220
L=$OUT/logs/run220-h100; mkdir -p $L/records $L/records_seed1
cp run220.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstage > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 120 python3 benchmarks/probe.py --repeat 5 --records 4096x16x4096 --family colstage --variant "PIN=1" --variant "PIN=1 KSTAGE=256" --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -4
timeout 100 python3 benchmarks/probe.py --repeat 5 --records 4096x8x4096 --family colstage --variant "PIN=1" --out $L/probe8.json > $L/probe8.txt 2>&1
grep -v rounds $L/probe8.txt | tail -3
timeout 100 python3 -m autotune search --sizes 4096x16x4096 --family colstage --timeout 60 --seed 0 --results $L/records > $L/search.txt 2>&1
timeout 100 python3 -m autotune search --sizes 4096x16x4096 --family colstage --timeout 60 --seed 1 --results $L/records_seed1 > $L/search_seed1.txt 2>&1
timeout 100 python3 -m autotune search --sizes 4096x8x4096 --family colstage --timeout 60 --seed 0 --results $L/records > $L/search8.txt 2>&1
grep -hE "^colstage|took" $L/search*.txt
rm -f $L/records*/*/optuna.db* $L/records*/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
