#!/usr/bin/env bash
# Device run 23 (H200): the default `autotune search --size 4096` after the search changes of
# run 22 (window of trials in flight, neighbour phase, 0.05 s trial timing), from nothing: an
# empty results folder and a cold compile cache, compiles included (issue 3: <= 120 s).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/fresh-cache
L=$OUT/logs; mkdir -p $L
nproc > $L/machine.txt
s=$(date +%s.%N)
timeout 200 python3 -m autotune.cli search --size 4096 --results /tmp/fresh > $L/search4096_fresh.txt 2>&1
rc=$?
echo "autotune search --size 4096 (empty results, cold cache): exit $rc wall $(python3 -c "import time; print(round(time.time() - $s, 1))") s" | tee -a $L/search4096_fresh.txt
grep -v "^\[" $L/search4096_fresh.txt | tail -14
cp /tmp/fresh/*/4096x4096x4096.json $L/ 2>/dev/null
