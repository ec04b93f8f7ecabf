# Issue 16: searches by time with sampler seeds not used at these shapes before, warptile's default
# space: 32x4096x11008, 64x4096x4096, 128x11008x4096 (90 s each, seed 14) and 4096x4096x64 (90 s,
# seed 15: run 181's record came from seed 14); into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache182
L=$OUT/logs/run182-h100; mkdir -p $L
cp run182.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
timeout 330 python3 -m autotune search --sizes 32x4096x11008,64x4096x4096,128x11008x4096 --family warptile --timeout 90 --seed 14 --results /tmp/resc > $L/search_rows.txt 2>&1
timeout 120 python3 -m autotune search --sizes 4096x4096x64 --family warptile --timeout 90 --seed 15 --results /tmp/resc > $L/search_k64.txt 2>&1
for f in $L/search_*.txt; do grep -vE "^\[" $f | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"; done
mkdir -p $L/records; for s in 32x4096x11008 64x4096x4096 128x11008x4096 4096x4096x64; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
