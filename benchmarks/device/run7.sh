#!/usr/bin/env bash
# Device run 7 (H100): a real search with a deliberately broken family mixed in (out-of-bounds
# writes and endless loops), then the GPU tests including that one.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
( time AUTOTUNE_TEMPLATES=tests/data/broken timeout 300 python3 -m autotune.cli search --size 2048 \
    --family broken vectorized warptile --sampler grid --trials 9 --candidate-timeout 10 --results /tmp/faults ) > $L/fault_search.txt 2>&1
tail -14 $L/fault_search.txt
python3 - > $L/fault_trials.txt 2>&1 <<'PY'
import optuna, glob
url = "sqlite:///" + glob.glob("/tmp/faults/*/optuna.db")[0]
for name in optuna.get_all_study_names(url):
    for t in optuna.load_study(study_name=name, storage=url).trials:
        if t.user_attrs.get("evaluated"):
            m = t.user_attrs.get("measurement", {})
            print(f"{t.number:3d} {t.state.name:9s} {t.user_attrs['status']:14s} {t.user_attrs['config']:60s} "
                  f"{(m.get('gflops') or 0):8.0f}  {t.user_attrs.get('reason', '')[:70]}")
PY
cat $L/fault_trials.txt
timeout 200 python3 -m pytest tests/gpu -x -q -p no:cacheprovider 2>&1 | tail -4 | tee $L/gpu_tests.txt
