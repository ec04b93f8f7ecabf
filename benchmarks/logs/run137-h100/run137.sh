#!/usr/bin/env bash
# Run 137 (issue 17): the helper copies (_pack_b, _pack_c, _unpack_c, _scale_c) with four loads in
# flight a thread and a grid a quarter the size: GPU correctness (every family at the awkward
# shapes, split / stream-K with beta, layouts with PACKB 2), before (_old: HEAD) and after at the
# odd shapes where B and C are copied, 5 rounds each alternating with cuBLAS; then untuned.py twice.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run137-h100; mkdir -p $L; cp run137.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
NEW="env PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atc_new"
OLD="env PYTHONPATH=/tmp/site:$PWD/_old AUTOTUNE_CACHE=/tmp/atc_old"
$NEW timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_correctness.py tests/gpu/test_streamk.py \
  tests/gpu/test_layouts_gpu.py > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
R=$PWD/results
for v in OLD NEW; do
  T=$( [ $v = OLD ] && echo $PWD/_old || echo $PWD )
  ${!v} timeout 60 python3 $T/benchmarks/probe.py --results $R --records 200x3000x1000 --repeat 5 \
    --shapes 777,769x771x773,1001x1003x999,2049x2051x2047 --out $L/odd_${v}.json > $L/odd_${v}.txt 2>&1
  ${!v} timeout 40 python3 $T/benchmarks/probe.py --results $R --records 16x4096x4096,4096x16x4096,4096x4096x4096_nt \
    --repeat 3 --out $L/copies_${v}.json > $L/copies_${v}.txt 2>&1
  echo "== $v"; grep -E "rounds|geometric" $L/odd_${v}.txt $L/copies_${v}.txt
done
for i in 1 2; do
  $NEW timeout 150 python3 benchmarks/untuned.py --out $L/untuned_$i.json > $L/untuned_$i.txt 2>&1
  grep -E "777x|geometric" $L/untuned_$i.txt
done
tar czf $OUT/logs.tar.gz -C $OUT logs
