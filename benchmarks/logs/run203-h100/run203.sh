# Issue 16, few columns: the colstream family (templates/colstream.cu.j2; the prototype of run
# 202 made general) searched at 4096 x {8, 16} x 4096 (60 s each, seed 0; its seeds are run 202's
# best). Prediction: 8 columns 29.5-30.5 us (above 2.2 TB/s), 16 columns 33-34 us. Its GPU test.
# Then the three A_ROWS records measured again on the code with the 4-byte fallback rolled up
# (their source changed: 190 -> 112 registers; run 200 had them within 1% of before): a search
# of each record's one point.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache203
L=$OUT/logs/run203-h100; mkdir -p $L/records
cp run203.sh $L/; cp -r pin $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstream > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
timeout 200 python3 -m autotune search --sizes 4096x8x4096,4096x16x4096 --family colstream --timeout 60 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | tail -14
for s in 4096x8x4096 4096x16x4096 4096x32x4096; do
  timeout 60 python3 -m autotune search --sizes $s --family warptile --config pin/warptile_$s.yaml --trials 1 --results $L/records > $L/pin_$s.txt 2>&1
  grep -vE "^\[" $L/pin_$s.txt | grep -E "^warptile|cuBLAS" | tail -2
done
tar czf $OUT/logs.tar.gz -C $OUT logs
