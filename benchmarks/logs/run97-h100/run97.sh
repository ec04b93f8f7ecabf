#!/bin/bash
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
mkdir -p $OUT/logs; cp run97.sh $OUT/logs/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/logs/gpu.txt
SH=200x300x100,1000x777x300,1023x1021x257,4096,8192x8192x1024
timeout 150 python3 benchmarks/tier_probe.py --family wgmma_tf32 --precision medium --shapes $SH --out $OUT/logs/seeds.json > $OUT/logs/seeds.txt 2>&1
for v in "BM=128 BN=128 STAGES=4" "BM=192 BN=128 STAGES=4" "BM=256 BN=128 STAGES=3" "BM=128 BN=192 STAGES=4" "BM=256 BN=64 STAGES=5"; do
  tag=$(echo $v | tr ' =' '_-')
  sets=""; for x in $v; do sets="$sets --set $x"; done
  timeout 90 python3 benchmarks/tier_probe.py --family wgmma_tf32 --precision medium --shapes 1000x777x300,4096,8192x8192x1024 --set DIRECT=1 --set ACC=tc $sets --out $OUT/logs/direct_$tag.json > $OUT/logs/direct_$tag.txt 2>&1
done
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_tiers_gpu.py -x > $OUT/logs/gpu_tests.txt 2>&1
tail -3 $OUT/logs/gpu_tests.txt
cat $OUT/logs/seeds.txt | grep -v "^      "
for f in $OUT/logs/direct_*.txt; do echo "== $f"; grep -v "^      " $f; done
tar czf $OUT/logs.tar.gz -C $OUT logs
