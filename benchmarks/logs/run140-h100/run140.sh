#!/usr/bin/env bash
# Run 140 (issue 16): fewcols with warps along K (WK): GPU correctness (every family at the
# awkward shapes, WK's own cases; layouts and split / stream-K with beta for the copies of run
# 139), then the few-columns shapes searched with fewcols at sweep.py's budget, sampler seeds 0 / 1,
# each into its own copy of results/ (seed 0's records come back); untuned.py once more (issue 17).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run140-h100; mkdir -p $L; cp run140.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
grep -E "passed|failed|^FAILED" $L/gpu_tests.txt | head -20
SH=4096x1x4096,11008x1x4096,4096x8x4096,4096x16x4096,4096x32x4096
for s in 0 1; do
  rm -rf /tmp/res$s; cp -r results /tmp/res$s
  extra=""; [ $s = 0 ] && extra="--copy-to $OUT/results"
  timeout 110 python3 benchmarks/sweep.py --shapes $SH --family fewcols --trials 40 --seed $s --results /tmp/res$s $extra \
    --out $L/sweep_fewcols_s$s.json > $L/sweep_fewcols_s$s.txt 2>&1
  tail -9 $L/sweep_fewcols_s$s.txt
done
timeout 150 python3 benchmarks/untuned.py --out $L/untuned.json > $L/untuned.txt 2>&1
grep -E "777x|geometric" $L/untuned.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_layouts_gpu.py tests/gpu/test_streamk.py > $L/gpu_tests2.txt 2>&1
grep -E "passed|failed|^FAILED" $L/gpu_tests2.txt | head -20
tar czf $OUT/logs.tar.gz -C $OUT logs $( [ -d $OUT/results ] && echo results )
