#!/usr/bin/env bash
# Device run 21 (H200): the landscape for issue 5's Kernel Tuner goal. autotune's brute force
# over the benchmark space at 4096^3 and 2048^3 (every point, for replaying samplers offline),
# Kernel Tuner's own brute force into its cache file (for its simulation mode), and two repeats
# of autotune TPE vs Kernel Tuner's simulated annealing and random sample with autotune's
# wall time broken down (waiting for compiles, GPU calls, the rest).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nproc > $L/machine.txt; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> $L/machine.txt
timeout 430 python3 benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 2 \
  --strategies simulated_annealing,random_sample --landscape $L/landscape_4096.json \
  --kt-cache $L/kt_cache_4096.json --out $L/vs_kernel_tuner.json > $L/vs_kernel_tuner.txt 2>&1
timeout 90 python3 benchmarks/vs_kernel_tuner.py --size 2048 --repeats 0 --landscape $L/landscape_2048.json \
  > $L/landscape_2048.txt 2>&1
tar czf $OUT/run21.tgz -C $OUT logs
cut -c1-400 $L/vs_kernel_tuner.txt | tail -30; tail -3 $L/landscape_2048.txt
