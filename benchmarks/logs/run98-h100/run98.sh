#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
mkdir -p $OUT/logs; cp run98.sh exp98.py $OUT/logs/
timeout 200 python3 exp98.py 4096 2>&1 | tee $OUT/logs/exp98.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
