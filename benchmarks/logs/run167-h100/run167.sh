# Issue 16, the mirror's premise (notes/performance.md, "Where the rest of the 1.3x could come
# from"): does warptile run the row side with both operands read transposed (tt: C^T = B^T A^T
# reads B as A' stored K x N' and A as B' stored M x K) as fast as nn? Searches at 16 and 32 rows
# in tt, then the nn records of those shapes and the column-side records re-timed in one process.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache167
L=$OUT/logs/run167-h100; mkdir -p $L
cp run167.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m autotune search --sizes 16x4096x4096_tt,32x4096x4096_tt --family warptile --trials 40 \
  --results /tmp/res167 --quiet > $L/search_tt.txt 2>&1
mkdir -p $L/records_tt; cp /tmp/res167/*/*.json $L/records_tt/
cp -r results /tmp/resall; G=$(ls /tmp/res167); cp /tmp/res167/$G/*.json /tmp/resall/$G/
timeout 150 python3 benchmarks/probe.py --results /tmp/resall --repeat 3 --out $L/probe.json \
  --records 16x4096x4096,16x4096x4096_tt,32x4096x4096,32x4096x4096_tt,4096x16x4096,4096x32x4096 > $L/probe.txt 2>&1
tail -15 $L/search_tt.txt; tail -12 $L/probe.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
