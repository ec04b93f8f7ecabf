# Issue 16: fewcols with B's rows through A's ring (B_RING). (1) The GPU tests of fewcols (its
# B_RING cases at awkward shapes) and of every family; (2) fewcols' default space, now with
# B_RING and chunks of 8192-16384, searched 60 s a shape at 4096 x {16, 8, 32} x 4096 (seed 6)
# into a copy of results/, every trial dumped (the B_RING seeds are measured first).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache170
L=$OUT/logs/run170-h100; mkdir -p $L
cp run170.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 12 -rf tests/gpu/test_correctness.py -k "fewcols or all_families" > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
S=4096x16x4096,4096x8x4096,4096x32x4096
timeout 300 python3 -m autotune search --sizes $S --family fewcols --timeout 60 --seed 6 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^fewcols|took|wrote"
python3 - > $L/trials.jsonl <<'PY'
import json, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
url = "sqlite:////tmp/resc/nvidia-h100-80gb-hbm3/optuna.db"
for s in optuna.get_all_study_summaries(url):
    for t in optuna.load_study(study_name=s.study_name, storage=url).trials:
        print(json.dumps({"study": s.study_name, "number": t.number, "value": t.value, "params": t.params, "attrs": t.user_attrs}, default=str))
PY
python3 - $L/trials.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    p = r["params"]
    if p.get("B_RING") == 1 and r["number"] < 20:
        print(r["study"].split("/")[1], r["number"], r["value"], {k: p[k] for k in ("NR", "RPW", "WARPS", "WK", "KCHUNK", "UNROLL", "A_STAGES") if k in p})
PY
mkdir -p $L/records; for s in ${S//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
