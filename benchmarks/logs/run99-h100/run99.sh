#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
mkdir -p $OUT/logs; cp run99.sh exp99.py $OUT/logs/
for s in 4096 8192x8192x1024 2048; do timeout 100 python3 exp99.py $s 2>&1 | tee $OUT/logs/exp99_$s.txt; done
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_tiers_gpu.py -x > $OUT/logs/gpu_tests.txt 2>&1; tail -3 $OUT/logs/gpu_tests.txt
timeout 120 python3 benchmarks/tier_probe.py --family wgmma_tf32 --precision medium --shapes 200x300x100,1000x777x300,1023x1021x257,4096 --out $OUT/logs/seeds.json > $OUT/logs/seeds.txt 2>&1
grep -v "^      " $OUT/logs/seeds.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
