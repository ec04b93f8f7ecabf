#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
mkdir -p $OUT/logs; cp run102.sh exp102.py $OUT/logs/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/logs/gpu.txt
timeout 280 python3 exp102.py 200x320x100:nn,1000x777x300:nn,1023x1021x257:nn,1000x776x300:nt,4096x4096x4096:nn "" $OUT/logs/exp102_a.json 2>&1 | tee $OUT/logs/exp102_a.txt
timeout 250 python3 exp102.py 4096x4096x4096:nt,8192x8192x1024:nn,2048x2048x2048:nn,8192x8192x8192:nn "" $OUT/logs/exp102_b.json 2>&1 | tee $OUT/logs/exp102_b.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
