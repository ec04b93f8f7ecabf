# Issue 16, the few-columns side (4096 x 8-32 x 4096 at 1.8-2.0 TB/s): (1) how fast DRAM delivers
# A read by rows in runs of 128 B-2 KB through a cp.async ring (stream_pattern.py); (2) fewcols'
# staged lane-rows kernel searched in a region with longer runs of a row a stage
# (benchmarks/spaces/fewcols_long_rows.yaml, 60 s a shape); (3) 256x256x16384 (warptile, 38
# TFLOP/s) searched by time, 80 s. Searches into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache169
L=$OUT/logs/run169-h100; mkdir -p $L
cp run169.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 120 python3 benchmarks/stream_pattern.py --out $L/stream_pattern.json > $L/stream_pattern.txt 2>&1
cat $L/stream_pattern.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
S=4096x16x4096,4096x8x4096,4096x32x4096
timeout 300 python3 -m autotune search --sizes $S --family fewcols --config benchmarks/spaces/fewcols_long_rows.yaml \
  --timeout 60 --seed 5 --results /tmp/resc > $L/search_fewcols.txt 2>&1
grep -E "x cuBLAS|wrote|took|until" $L/search_fewcols.txt | head -20
timeout 150 python3 -m autotune search --sizes 256x256x16384 --family warptile --timeout 80 --seed 5 --results /tmp/resc \
  > $L/search_256.txt 2>&1
grep -E "x cuBLAS|wrote|took|until" $L/search_256.txt | head -10
mkdir -p $L/records; for s in ${S//,/ } 256x256x16384; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
