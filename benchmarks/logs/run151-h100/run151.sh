set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run151-h100; mkdir -p $L
cp run151.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code 4bbf902 (default window = jobs, at least 8); nproc $(nproc)" >> $L/gpu.txt
# Issue 18's first bar on this code (run 115's protocol): cold warptile searches, 30 trials,
# sampler seeds 0-4, each its own process, fresh results and compile caches; then every best
# and the best known configs re-timed in one process with cuBLAS.
# VARIANT (optional): the search arguments in place of --no-seeds; TAG names its files.
for SHAPE in $SHAPES; do
  python3 benchmarks/cold_search.py --shapes $SHAPE --seeds 0,1,2,3,4 --family warptile --stored results/nvidia-h100-80gb-hbm3 \
    --reference benchmarks/logs/run108-h100/references.json ${VARIANT:+--variant "$VARIANT"} --out $L/$SHAPE$TAG > $L/cold_$SHAPE$TAG.txt 2>&1
  tail -12 $L/cold_$SHAPE$TAG.txt
  rm -rf $L/$SHAPE$TAG/work
done
tar czf $OUT/logs.tar.gz -C $OUT logs
