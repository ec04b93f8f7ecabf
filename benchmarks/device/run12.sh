#!/usr/bin/env bash
# Device run 12 (H100): why did run 10's cold-cache searches fail? Same commands, with the
# failure reasons now printed, and the cubin taken only when it matches CuPy's.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
python3 -c "import cupy_backends.cuda.libs.nvrtc as n, cuda.pathfinder as p; print(n.getVersion(), p.load_nvidia_dynamic_lib('nvrtc'))" 2>&1 | tee $L/nvrtc.txt
timeout 90 python3 -m autotune.cli search --sizes 512,768x1000x640 --family warptile --trials 8 --results /tmp/sizes --quiet > $L/search_sizes.txt 2>&1; grep -v "^\[" $L/search_sizes.txt | cut -c1-400
timeout 330 python3 benchmarks/vs_kernel_tuner.py --size 4096 --fevals 20 --repeats 2 --out $L/vs_kernel_tuner.json > $L/vs_kernel_tuner.txt 2>&1; tail -16 $L/vs_kernel_tuner.txt | cut -c1-300
