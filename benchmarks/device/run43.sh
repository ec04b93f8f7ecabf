#!/usr/bin/env bash
# Device run 43 (H200, issue 3): the split launch with programmatic dependent launch, probed
# outside the tuner (benchmarks/pdl_probe.py) against the plain split launch, whole tiles and
# cuBLAS, in one process.
set -u
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 200 python3 benchmarks/pdl_probe.py --shapes 4096,4096,3000,8192 --reps 12 --calls 20 > $L/pdl.txt 2>&1
echo "exit $?" >> $L/pdl.txt
timeout 150 python3 benchmarks/pdl_probe.py --shapes 4096,8192 --reps 8 --calls 20 --set LANES_N=4 > $L/pdl_lanes4.txt 2>&1
echo "exit $?" >> $L/pdl_lanes4.txt
cat $L/pdl.txt $L/pdl_lanes4.txt
tar czf $OUT/run43.tar.gz -C $OUT logs
