# Issue 16: the small set's shapes with the most room between their record and their bound
# (compute at ~50 TFLOP/s or the read of the streamed operand), searched by time as in run 168
# (--timeout alone: the last 40% to neighbours), warptile 70 s a shape, then fewcols (with
# B_RING) 50 s at 4096 x {16, 8} x 4096, seed 7; into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache171
L=$OUT/logs/run171-h100; mkdir -p $L
cp run171.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
W=4096x4096x64,200x3000x1000,200x4096x4096,32x4096x4096,128x11008x4096
timeout 420 python3 -m autotune search --sizes $W --family warptile --timeout 70 --seed 7 --results /tmp/resc > $L/search_warptile.txt 2>&1
grep -vE "^\[" $L/search_warptile.txt | grep -E "^warptile|took|wrote|cuBLAS [0-9]"
F=4096x16x4096,4096x8x4096
timeout 130 python3 -m autotune search --sizes $F --family fewcols --timeout 50 --seed 7 --results /tmp/resc > $L/search_fewcols.txt 2>&1
grep -vE "^\[" $L/search_fewcols.txt | grep -E "^fewcols|took|wrote|cuBLAS [0-9]"
mkdir -p $L/records; for s in ${W//,/ } ${F//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
