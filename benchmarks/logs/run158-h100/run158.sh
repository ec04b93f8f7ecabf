#!/usr/bin/env bash
# Run 158 (issue 16): warptile's default space with 16-row tiles (BM 16) and their two seeds.
# GPU tests: every family at the awkward shapes (the new seeds and 16-row variants in every
# schedule among them); the default `autotune search --size 4096` from an empty results folder
# and a cold compile cache (issue 16: within 120 s, at least 1.00x); then warptile and fewrows
# searched with the default space (30 trials, sampler seeds 1 and 2) at 8-16 rows.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run158-h100; mkdir -p $L; cp run158.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $(cat COMMIT) + BM 16 in configs/warptile.yaml (working tree)" >> $L/gpu.txt
T0=$(date +%s)
AUTOTUNE_CACHE=/tmp/atc_tests timeout 250 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/gpu/test_correctness.py -k all_families > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt; echo "tests $(( $(date +%s) - T0 )) s"
rm -rf /tmp/empty; mkdir /tmp/empty
T1=$(date +%s)
AUTOTUNE_CACHE=/tmp/atc_cold timeout 150 python3 -m autotune search --size 4096 --results /tmp/empty > $L/default_4096.txt 2>&1
echo "default search: $(( $(date +%s) - T1 )) s wall"; tail -14 $L/default_4096.txt
for S in 1 2; do
  rm -rf /tmp/res$S; cp -r results /tmp/res$S
  AUTOTUNE_CACHE=/tmp/atcache timeout 75 python3 benchmarks/sweep.py --shapes 16x4096x4096,16x11008x4096,8x4096x4096 --family warptile fewrows \
    --trials 30 --seed $S --results /tmp/res$S --out $L/sweep_s$S.json > $L/sweep_s$S.txt 2>&1
  tail -7 $L/sweep_s$S.txt
done
tar czf $OUT/logs.tar.gz -C $OUT logs
