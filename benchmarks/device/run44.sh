#!/usr/bin/env bash
# Device run 44 (H200, issue 3): the split launch's tail kernel per k-iteration, over whole aligned
# tiles and over its real tail, against the whole-tile kernel (benchmarks/tail_rate.py).
set -u
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
for s in 4096 8192; do
  timeout 150 python3 benchmarks/tail_rate.py --size $s --reps 10 --calls 20 > $L/tail_rate_$s.txt 2>&1; echo "exit $?" >> $L/tail_rate_$s.txt
done
timeout 100 python3 benchmarks/tail_rate.py --size 4096 --reps 10 --calls 20 --set LANES_N=4 > $L/tail_rate_4096_lanes4.txt 2>&1; echo "exit $?" >> $L/tail_rate_4096_lanes4.txt
cat $L/tail_rate_*.txt
tar czf $OUT/run44.tar.gz -C $OUT logs
