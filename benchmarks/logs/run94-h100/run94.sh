#!/usr/bin/env bash
# Run 94: the 16-byte loads spelled out (run 93: merged into scalar ones); REGB (B stored N x K through registers): GPU correctness, the nt/tt records re-timed with REGB=1, searches at 4096_nt and 4096_tt.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L; cp run94.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 150 python3 benchmarks/probe.py --records 4096x4096x4096_nt,4096x4096x4096_tt,8192x8192x1024_nt,8192x8192x1024_tt,512x512x512_nt_b64 --set REGB=1 --out $L/probe_regb.json > $L/probe_regb.txt 2>&1
tail -25 $L/probe_regb.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_layouts_gpu.py -k "every_family or (pitched and REGB)" > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
rm -rf /tmp/r; mkdir -p /tmp/r
timeout 250 python3 benchmarks/sweep.py --shapes 4096_nt,4096_tt --trials 30 --results /tmp/r --out $L/sweep_nt_tt.json > $L/sweep_nt_tt.txt 2>&1
tail -6 $L/sweep_nt_tt.txt
mkdir -p $OUT/results && find /tmp/r -name "*.json" -exec cp {} $OUT/results/ \;
tar czf $OUT/logs.tar.gz -C $OUT logs results
