# Issue 16: more of the small set searched by time (--timeout alone, as runs 168 and 171): the
# tiny cubes 64^3 and 128^3 over the small-tile families (60 s a shape, shared), 8x4096x4096 over
# fewrows and warptile (60 s), and with a second sampler seed the three 64-128-row/column shapes
# that run 168 searched with seed 4 (70 s each, warptile); into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache172
L=$OUT/logs/run172-h100; mkdir -p $L
cp run172.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
T=64x64x64,128x128x128
timeout 160 python3 -m autotune search --sizes $T --family coarse1d coarse2d tiled vectorized --timeout 60 --seed 7 --results /tmp/resc > $L/search_tiny.txt 2>&1
grep -vE "^\[" $L/search_tiny.txt | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"
timeout 90 python3 -m autotune search --sizes 8x4096x4096 --family fewrows warptile --timeout 60 --seed 7 --results /tmp/resc > $L/search_8rows.txt 2>&1
grep -vE "^\[" $L/search_8rows.txt | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"
W=128x4096x4096,4096x128x4096,64x4096x4096
timeout 280 python3 -m autotune search --sizes $W --family warptile --timeout 70 --seed 7 --results /tmp/resc > $L/search_warptile.txt 2>&1
grep -vE "^\[" $L/search_warptile.txt | grep -E "^warptile|took|wrote|cuBLAS [0-9]"
mkdir -p $L/records; for s in ${T//,/ } 8x4096x4096 ${W//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
