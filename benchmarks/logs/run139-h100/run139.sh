#!/usr/bin/env bash
# Run 139 (issue 17): the helper copies in row pieces (no division per element), four loads in
# flight a thread: GPU correctness (awkward shapes, split / stream-K with beta, layouts with
# PACKB 2), Nsight Compute's duration of each kernel of one call at 777^3, before (_old: HEAD) /
# after at the odd shapes, 5 rounds alternating with cuBLAS, and untuned.py. (fewcols as at HEAD:
# its working-tree change is another step.)
set -u
cp _old/templates/fewcols.cu.j2 templates/; cp _old/configs/fewcols.yaml configs/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run139-h100; mkdir -p $L; cp run139.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
NEW="env PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atc_new"
OLD="env PYTHONPATH=/tmp/site:$PWD/_old AUTOTUNE_CACHE=/tmp/atc_old"
P=$(python3 -c "
import json; d=json.load(open('results/nvidia-h100-80gb-hbm3/200x3000x1000.json')); print(json.dumps(d['families']['warptile']['config']['params']))")
$NEW timeout 60 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --cache-control none \
  --metrics gpu__time_duration.sum,launch__grid_size python3 benchmarks/profile_one.py warptile "$P" 777 > $L/ncu_777.txt 2>&1
grep -E "autotune_sgemm|duration" $L/ncu_777.txt | tail -8
R=$PWD/results
for v in OLD NEW; do
  T=$( [ $v = OLD ] && echo $PWD/_old || echo $PWD )
  ${!v} timeout 60 python3 $T/benchmarks/probe.py --results $R --records 200x3000x1000 --repeat 5 \
    --shapes 777,769x771x773,1001x1003x999,2049x2051x2047 --out $L/odd_${v}.json > $L/odd_${v}.txt 2>&1
  echo "== $v"; grep -E "rounds|geometric" $L/odd_${v}.txt
done
$NEW timeout 150 python3 benchmarks/untuned.py --out $L/untuned.json > $L/untuned.txt 2>&1
grep -E "777x|geometric" $L/untuned.txt
$NEW timeout 250 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_correctness.py tests/gpu/test_streamk.py \
  tests/gpu/test_layouts_gpu.py > $L/gpu_tests.txt 2>&1
grep -E "passed|failed|^FAILED" $L/gpu_tests.txt | head -30
tar czf $OUT/logs.tar.gz -C $OUT logs
