#!/bin/bash
# Run 105: medium searched with DIRECT in the space (wgmma_tf32, 20 trials, sampler seed 0) at
# 4096^3 and 8192 x 8192 x 1024 in nn and nt, and 2048^3; records into results/ (copied out).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L $OUT/results; cp run105.sh $L/
timeout 540 python3 benchmarks/sweep.py --shapes 4096,4096_nt,2048,8192x8192x1024,8192x8192x1024_nt --family wgmma_tf32 --precision medium --trials 20 --copy-to $OUT/results --out $L/sweep105.json > $L/sweep105.txt 2>&1
tail -12 $L/sweep105.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
