# Issue 16: (1) the GPU tests of every family at the awkward shapes, on the code as committed;
# (2) fewcols' reductions where a launch is a large part of the time: 30-s searches (seed 10) at
# 512x16x4096, 1024x8x2048, 2048x16x1024, and each search's best point of each reduction.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache177
L=$OUT/logs/run177-h100; mkdir -p $L
cp run177.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 12 -rf tests/gpu/test_correctness.py > $L/gpu_tests.txt 2>&1
tail -4 $L/gpu_tests.txt
S=512x16x4096,1024x8x2048,2048x16x1024
timeout 150 python3 -m autotune search --sizes $S --family fewcols --timeout 30 --seed 10 --results /tmp/res177 > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^fewcols|took|cuBLAS [0-9]"
python3 - > $L/reductions.txt <<'PY'
import json, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
url = "sqlite:////tmp/res177/nvidia-h100-80gb-hbm3/optuna.db"
for s in optuna.get_all_study_summaries(url):
    best = {}
    for t in optuna.load_study(study_name=s.study_name, storage=url).trials:
        c = t.user_attrs.get("config")
        name = c if isinstance(c, str) else (c or {}).get("name", "")
        if t.value and "REDUCE" in name:
            red = name.split("REDUCE")[1].split("_RPW")[0]
            if t.value > best.get(red, (0, ""))[0]:
                best[red] = (t.value, name)
    print(s.study_name.split("/")[1], {r: (round(v), n) for r, (v, n) in sorted(best.items())})
PY
cat $L/reductions.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
