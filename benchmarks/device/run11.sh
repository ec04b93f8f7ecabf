#!/usr/bin/env bash
# NOT RUN: the session's device time ran out before this could start (README, "Faults, restarts, many GPUs").
# Device run 11 (2 x H200): one study, two workers vs one, after the shared-budget fix, with
# more trials (80) than run 8, so worker start-up and the final re-time weigh less.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L
nvidia-smi -L | tee $L/gpus.txt
for w in 1 2; do
  ( time AUTOTUNE_CACHE=/tmp/atcache$w timeout 110 python3 -m autotune.cli search --size 4096 --family warptile \
      --trials 80 --workers $w --results /tmp/w$w ) > $L/workers$w.txt 2>&1
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
