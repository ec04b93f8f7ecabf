#!/usr/bin/env bash
# Device run 45 (H200, issue 3): the split launch's tail with each piece out of line -- its rate
# per k-iteration (tail_rate.py), the A/B against whole tiles, and the split-launch GPU tests.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $L/gpu.txt 2>&1
timeout 120 python3 benchmarks/tail_rate.py --size 4096 --reps 10 --calls 20 > $L/tail_rate_4096.txt 2>&1; echo "exit $?" >> $L/tail_rate_4096.txt
timeout 120 python3 benchmarks/tail_rate.py --size 4096 --reps 10 --calls 20 --set LANES_N=4 > $L/tail_rate_4096_lanes4.txt 2>&1; echo "exit $?" >> $L/tail_rate_4096_lanes4.txt
cat $L/tail_rate_4096.txt $L/tail_rate_4096_lanes4.txt | cut -c1-150
timeout 200 python3 benchmarks/explore.py --shapes 4096,4096,8192,3000,1024,4096x1024x4096 --configs benchmarks/device/ab_tail_outofline.yaml --out $L/explore.json > $L/explore.txt 2>&1
grep -E "^==|^ +[0-9]+ " $L/explore.txt | sed 's/warptile_BK16_BM128_BN256_//; s/_MINB1//; s/_PACKB1_PAD_A4_PAD_B0_PREFETCH0_SPLITK1//; s/_WARPS_M2_WARPS_N4//' | cut -c1-140
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_streamk.py tests/gpu/test_search_gpu.py -k "split or stream_k_header or budget" > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt | cut -c1-300
tar czf $OUT/run45.tar.gz -C $OUT logs
