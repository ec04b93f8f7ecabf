#!/usr/bin/env bash
# Run 95: fewcols with a lane to a row (LANE_ROWS): GPU correctness (awkward shapes, layouts, pitches),
# then fewcols searched at the small set's 8-32-column shapes and at 4096x64x4096.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L; cp run95.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/gpu/test_correctness.py "tests/gpu/test_layouts_gpu.py::test_pitched_and_unaligned_operands_read_in_place" -k "correct or fewcols" > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
mkdir -p $OUT/results
timeout 300 python3 benchmarks/sweep.py --shapes 4096x32x4096,4096x16x4096,4096x8x4096,4096x64x4096 --family fewcols --trials 30 --copy-to $OUT/results --out $L/sweep_fewcols.json > $L/sweep_fewcols.txt 2>&1
tail -8 $L/sweep_fewcols.txt
tar czf $OUT/logs.tar.gz -C $OUT logs results
