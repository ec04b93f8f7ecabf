# Issue 16: the last searches by time of this session, each with a sampler seed not used at the
# shape before: 4096x32x4096 and 256x256x16384 (warptile, 80 s), 4096x4096x16 (vectorized and
# warptile, 60 s), 1x4096x4096 (fewrows, 50 s), 4096x1x4096 (fewcols, 50 s); into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache178
L=$OUT/logs/run178-h100; mkdir -p $L
cp run178.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
R="--seed 11 --results /tmp/resc"
timeout 190 python3 -m autotune search --sizes 4096x32x4096,256x256x16384 --family warptile --timeout 80 $R > $L/search_warptile.txt 2>&1
timeout 90 python3 -m autotune search --sizes 4096x4096x16 --family vectorized warptile --timeout 60 $R > $L/search_k16.txt 2>&1
timeout 70 python3 -m autotune search --sizes 1x4096x4096 --family fewrows --timeout 50 $R > $L/search_1row.txt 2>&1
timeout 70 python3 -m autotune search --sizes 4096x1x4096 --family fewcols --timeout 50 $R > $L/search_1col.txt 2>&1
for f in $L/search_*.txt; do grep -vE "^\[" $f | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"; done
mkdir -p $L/records; for s in 4096x32x4096 256x256x16384 4096x4096x16 1x4096x4096 4096x1x4096; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
