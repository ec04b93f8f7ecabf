#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
mkdir -p $OUT/logs; cp run103.sh exp103.py $OUT/logs/
timeout 150 python3 exp103.py 4096x4096x4096 2>&1 | tee $OUT/logs/exp103_4096.txt
timeout 150 python3 exp103.py 8192x8192x1024 2>&1 | tee $OUT/logs/exp103_8192x8192x1024.txt
timeout 150 python3 exp103.py 4096x4096x4096 nt 2>&1 | tee $OUT/logs/exp103_4096_nt.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
