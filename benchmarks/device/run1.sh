#!/usr/bin/env bash
# Device run 1: environment, GPU correctness tests, a first look at speed, a small search.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
mkdir -p $OUT
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; python3 -m pip list 2>/dev/null | grep -i -E "cupy|nvrtc|optuna|numpy|jinja|cuda-pathfinder"; nproc; } 2>&1 | tee $OUT/env.txt
timeout 200 python3 -m pytest tests/gpu -x -q -p no:cacheprovider 2>&1 | tail -30 | tee $OUT/gpu_tests.txt
timeout 200 python3 benchmarks/explore.py --shapes 4096 --family vectorized warptile --sample 40 --where SPLITK=1 --sass --out $OUT/explore4096.json 2>&1 | tee $OUT/explore4096.txt
