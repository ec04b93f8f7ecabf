# Issue 16: fewcols' REDUCE=ws_atomic (a split K's sums by atomics into a workspace that the
# tile's last block adds into C and leaves zeroed: one launch). (1) fewcols' GPU tests, every
# reduction at the awkward shapes; (2) the two fewcols records re-timed with ws_atomic, 5 rounds
# against cuBLAS; (3) fewcols' default space (now with ws_atomic) searched 60 s a shape at
# 4096 x {16, 8, 32} x 4096, seed 9, into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache176
L=$OUT/logs/run176-h100; mkdir -p $L
cp run176.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 150 python3 benchmarks/probe.py --records 4096x16x4096,4096x8x4096 --set REDUCE=ws_atomic --repeat 5 --out $L/probe.json > $L/probe.txt 2>&1
cat $L/probe.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 12 -rf tests/gpu/test_correctness.py -k "fewcols" > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
S=4096x16x4096,4096x8x4096,4096x32x4096
timeout 260 python3 -m autotune search --sizes $S --family fewcols --timeout 60 --seed 9 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^fewcols|took|wrote|cuBLAS [0-9]"
mkdir -p $L/records; for s in ${S//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
