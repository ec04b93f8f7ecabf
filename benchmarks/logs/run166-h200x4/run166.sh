# Issue 18 on the H200 host of runs 164-165: (1) each shape's fifteen... five 265-s searches' bests
# re-timed with the best known configs (the H100 record, run 108's landscape's three best, the
# H200 record) in one process, with cuBLAS; (2) the first bar: five default cold searches
# (30 trials, --no-seeds) a shape, searched and re-timed the same way. A GPU a shape.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run166-h200x4; mkdir -p $L
cp run166.sh $L/
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
REF="--stored results/nvidia-h100-80gb-hbm3 --reference benchmarks/logs/run165-h200x4/references.json"
B=benchmarks/logs
shape() {  # gpu shape
  CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/cold_search.py --shapes $2 $REF --out $L/long_$2 \
    --rows $B/run164-h200x4/long_$2_*/searches.jsonl $B/run165-h200x4/long_$2_*/searches.jsonl > $L/long_$2.txt 2>&1
  CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/cold_search.py --shapes $2 --seeds 0,1,2,3,4 --family warptile $REF \
    --variant=--no-seeds --out $L/short_$2 > $L/short_$2.txt 2>&1
  rm -rf $L/short_$2/work
}
shape 0 4096 & shape 1 2048 & shape 2 8192x8192x1024 &
wait
cat $L/*/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
