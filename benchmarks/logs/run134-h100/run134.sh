#!/usr/bin/env bash
# Run 134: the helpers' element loops by 32-bit division (issue 17) and medium nn's epilogue by
# 8-byte stores after a shuffle (issue 19): GPU correctness, then each before (_old: HEAD's code)
# and after, alternated, in the same run against cuBLAS.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run134-h100; mkdir -p $L; cp run134.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
NEW="env PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atc_new"
OLD="env PYTHONPATH=/tmp/site:$PWD/_old AUTOTUNE_CACHE=/tmp/atc_old"
$NEW timeout 230 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_correctness.py tests/gpu/test_streamk.py \
  tests/gpu/test_tiers_gpu.py > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
R=$PWD/results
for i in 1 2; do
  for v in OLD NEW; do
    T=$( [ $v = OLD ] && echo $PWD/_old || echo $PWD )
    ${!v} timeout 60 python3 $T/benchmarks/probe.py --results $R \
      --records 4096x4096x4096_medium,16x4096x4096,4096x16x4096,32x4096x4096 > $L/probe_${v}_$i.txt 2>&1
    ${!v} timeout 40 python3 $T/benchmarks/probe.py --results $R --records 200x3000x1000 \
      --shapes 777,769x771x773,1001x1003x999,2049x2051x2047 >> $L/probe_${v}_$i.txt 2>&1
    echo "== $v $i"; grep -v "^\s*$" $L/probe_${v}_$i.txt | tail -12
  done
done
tar czf $OUT/logs.tar.gz -C $OUT logs
