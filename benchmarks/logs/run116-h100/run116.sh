python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run116-h100; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
python3 benchmarks/cold_search.py --shapes $SHAPE --seeds 0,1,2,3,4 --family warptile --trials 90 --stored results/nvidia-h100-80gb-hbm3 \
  --reference benchmarks/logs/run108-h100/references.json --out $L/$SHAPE > $L/cold_$SHAPE.txt 2>&1
cat $L/cold_$SHAPE.txt
rm -rf $L/$SHAPE/work
tar czf $OUT/logs.tar.gz -C $OUT logs
