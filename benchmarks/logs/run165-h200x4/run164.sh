# Issue 18's second bar (>= 0.99 of the best known within 300 s, mean of 5 sampler seeds at
# 4096^3, 2048^3 and 8192x8192x1024) on four H100s of one host, a search a GPU at a time:
# `autotune search --family warptile --no-seeds --timeout 265` (no --trials: the time is the
# budget; its last 40% to neighbours of the best), each in its own process with fresh results
# and compile caches, 16 compile threads each (64 on the host). Searches only here: their bests
# are re-timed against the best known configs in a later call (cold_search.py --rows).
# PART 1: seeds 0-1 of each shape, seed 2 of 4096^3 and 2048^3.  PART 2: the rest, and the first
# bar's 30-trial searches (default budget) at 4096^3 and 2048^3 on GPU 3.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run$RUN-h100x4; mkdir -p $L
cp run164.sh $L/
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc); part $PART" >> $L/gpu.txt
lscpu > $L/lscpu.txt
LONG="--no-seeds --timeout 265"
job() {  # gpu shape seeds tag variant
  CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/cold_search.py --shapes $2 --seeds $3 --family warptile \
    --variant "$5" --search-only --out $L/$4 > $L/$4.txt 2>&1
}
if [ "$PART" = 1 ]; then
  job 0 4096 0,1 long_4096_a "$LONG" &
  job 1 2048 0,1 long_2048_a "$LONG" &
  job 2 8192x8192x1024 0,1 long_8192x8192x1024_a "$LONG" &
  (job 3 4096 2 long_4096_b "$LONG"; job 3 2048 2 long_2048_b "$LONG") &
else
  job 0 4096 3,4 long_4096_c "$LONG" &
  job 1 2048 3,4 long_2048_c "$LONG" &
  job 2 8192x8192x1024 2,3 long_8192x8192x1024_c "$LONG" &
  (job 3 8192x8192x1024 4 long_8192x8192x1024_d "$LONG"; job 3 4096 0,1,2,3,4 short_4096 "--no-seeds";
   job 3 2048 0,1,2,3,4 short_2048 "--no-seeds") &
fi
wait
# Each study's best so far against its loop's clock (the report's curve), then the work folders go.
python3 - "$L" <<'PY' > $L/curves.jsonl
import json, sys
from pathlib import Path
import optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
for db in sorted(Path(sys.argv[1]).glob("*/work/*/results/*/optuna.db")):
    url = f"sqlite:///{db}"
    for s in optuna.get_all_study_summaries(url):
        st = optuna.load_study(study_name=s.study_name, storage=url)
        pts = [(t.user_attrs["timing"]["at_s"], t.value, bool(t.user_attrs.get("local")))
               for t in st.get_trials(deepcopy=False) if t.user_attrs.get("timing") and t.user_attrs.get("evaluated")]
        print(json.dumps({"work": db.parts[-4], "study": s.study_name, "points": sorted(pts, key=lambda p: p[0])}))
PY
for d in $L/*/work; do rm -rf $d; done
cat $L/*.txt | grep -v "^\s*$" | tail -30
tar czf $OUT/logs.tar.gz -C $OUT logs
