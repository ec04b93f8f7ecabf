# Issue 16: warptile's split-K (data_parallel, SPLITK > 1) adds its partial sums by 4-byte atomics
# only; the split schedules' tails use one 16-byte atomic per four floats where C allows
# (va.patch: the same for split-K). Prediction: the 8-16-row records (split-K 4, 16 x 64-128 tiles)
# 2-5% faster (four times fewer atomics on 256-704 K floats of C), 16x4096x4096 over 2.2 TB/s.
# (1) The five H100 records with split-K, 5 rounds each against cuBLAS, on the code as committed,
# then with va.patch; (2) with the patch each record's config measured again by a search of that
# one point (so a record names the code that ran it), into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache194
L=$OUT/logs/run194-h100; mkdir -p $L
cp run194.sh va.patch $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
S=16x4096x4096,8x4096x4096,16x11008x4096,4096x64x4096,8x3000x1000
timeout 80 python3 benchmarks/probe.py --records $S --family warptile --repeat 5 > $L/probe_before.txt 2>&1
patch -p1 < va.patch > $L/patch.txt 2>&1
timeout 80 python3 benchmarks/probe.py --records $S --family warptile --repeat 5 > $L/probe_after.txt 2>&1
grep -vE "^\[" $L/probe_before.txt $L/probe_after.txt | grep -E "rounds|record"
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
for s in ${S//,/ }; do
  python3 - "$s" <<'PY'
import json, sys, yaml
s = sys.argv[1]
p = json.load(open(f"results/nvidia-h100-80gb-hbm3/{s}.json"))["families"]["warptile"]["config"]["params"]
yaml.safe_dump({"family": "warptile", "space": {k: [v] for k, v in p.items()}, "seeds": [p]}, open(f"/tmp/pin_{s}.yaml", "w"))
PY
  timeout 60 python3 -m autotune search --sizes $s --family warptile --config /tmp/pin_$s.yaml --trials 1 --results /tmp/resc >> $L/remeasure.txt 2>&1
done
grep -vE "^\[" $L/remeasure.txt | grep -E "^warptile|wrote|cuBLAS [0-9]"
mkdir -p $L/records; for s in ${S//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
