#!/usr/bin/env bash
# Device run 8 (2 x H200): one study, two workers (one per GPU) vs one worker; and the GPU
# tests on this machine (sm_90 too).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache
L=$OUT/logs; mkdir -p $L
nvidia-smi -L | tee $L/gpus.txt
timeout 120 python3 -m pytest tests/gpu/test_correctness.py -x -q -p no:cacheprovider -k "1x1x1 or 7x13" 2>&1 | grep -E "^E |passed|failed|Error" | head -30 | tee $L/gpu_tests_small.txt
for w in 1 2; do
  # a fresh compile cache for each, so neither run is helped by the other's compiles
  ( time AUTOTUNE_CACHE=/tmp/atcache$w timeout 250 python3 -m autotune.cli search --size 4096 --family warptile \
      --trials 64 --workers $w --results /tmp/w$w --quiet ) > $L/workers$w.txt 2>&1
  tail -8 $L/workers$w.txt
done
python3 - > $L/workers2_study.txt 2>&1 <<'PY'
import optuna, glob, collections
url = "sqlite:///" + glob.glob("/tmp/w2/*/optuna.db")[0]
for name in optuna.get_all_study_names(url):
    trials = optuna.load_study(study_name=name, storage=url).trials
    ev = [t for t in trials if t.user_attrs.get("evaluated") and t.state.name in ("COMPLETE", "PRUNED")]
    print(name, "evaluated:", len(ev), "distinct:", len({t.user_attrs["config"] for t in ev}))
    print("by worker:", dict(collections.Counter(t.user_attrs.get("worker") for t in ev)))
    print("states:", dict(collections.Counter(t.state.name for t in trials)))
PY
cat $L/workers2_study.txt
tar czf $OUT/run8.tar.gz -C /tmp w1 w2
