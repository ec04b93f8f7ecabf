set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run153-h100; mkdir -p $L
cp run153.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code c3b1fbb; nproc $(nproc)" >> $L/gpu.txt
# Issue 18's second bar: a cold search given 300 s (--timeout), its best against the best known.
# Each search its own process, fresh results and compile caches; then every best and the best
# known configs re-timed in one process with cuBLAS (cold_search.py).
# VARIANT (optional): the search arguments in place of --no-seeds; TAG names its files.
for SHAPE in $SHAPES; do
  python3 benchmarks/cold_search.py --shapes $SHAPE --seeds $SEEDS --family warptile --stored results/nvidia-h100-80gb-hbm3 \
    --reference benchmarks/logs/run108-h100/references.json ${VARIANT:+--variant "$VARIANT"} --out $L/$SHAPE$TAG > $L/cold_$SHAPE$TAG.txt 2>&1
  tail -12 $L/cold_$SHAPE$TAG.txt
  rm -rf $L/$SHAPE$TAG/work
done
tar czf $OUT/logs.tar.gz -C $OUT logs
