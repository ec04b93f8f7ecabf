# Issue 16: (1) warptile searched with A_ROWS and 64-deep k-tiles (benchmarks/spaces/warptile_a_rows.yaml,
# seeds run 188's winners), 75 s a shape at 8, 16, 32 columns (seed 1), into a copy of results/;
# (2) the best entries before and after, 5 rounds each against cuBLAS; (3) the default
# `autotune search --size 4096` from an empty results folder and a cold compile cache, now that
# warptile's default space holds A_ROWS and 16-column tiles (1.37 M valid points).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache189
L=$OUT/logs/run189-h100; mkdir -p $L
cp run189.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
S=4096x8x4096,4096x16x4096,4096x32x4096
timeout 290 python3 -m autotune search --sizes $S --family warptile --config benchmarks/spaces/warptile_a_rows.yaml \
    --timeout 75 --seed 1 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9_]+ +[0-9]|took|wrote|cuBLAS [0-9]|x cuBLAS"
timeout 60 python3 benchmarks/probe.py --records $S --repeat 5 > $L/probe_before.txt 2>&1
timeout 60 python3 benchmarks/probe.py --records $S --repeat 5 --results /tmp/resc > $L/probe_after.txt 2>&1
grep -vE "^\[" $L/probe_before.txt $L/probe_after.txt | grep -E "rounds|record"
mkdir -p $L/records; for s in ${S//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
mkdir -p /tmp/resd
( export AUTOTUNE_CACHE=/tmp/cache189d; /usr/bin/time -f "wall %e s" timeout 200 python3 -m autotune search --size 4096 --results /tmp/resd ) > $L/default_search.txt 2>&1
grep -vE "^\[" $L/default_search.txt | tail -14
tar czf $OUT/logs.tar.gz -C $OUT logs
