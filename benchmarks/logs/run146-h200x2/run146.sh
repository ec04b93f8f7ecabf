set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run146-h200x2; mkdir -p $L
cp run146.sh $L/
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
nproc >> $L/gpu.txt
T0=$EPOCHREALTIME
# Start-up phases (inputs of benchmarks/scaling.py), now with a worker's own plan apart.
cat > /tmp/startup_probe.py <<'PY'
import time
t0 = time.perf_counter()
from autotune.evaluate import GPUEvaluator
from autotune.space import Space
from autotune.studies import make_plan, queue_plan
from autotune.types import Problem
if __name__ == "__main__":
    t1 = time.perf_counter(); ev = GPUEvaluator(0); t2 = time.perf_counter()
    p = Problem(4096, 4096, 4096); ev.baseline(p); t3 = time.perf_counter()
    kw = dict(gpu_slug=ev.limits.slug, storage="sqlite:////tmp/st.db", trials=128)
    plan = make_plan(Space.load("warptile").without_seeds(), p, ev.limits, **kw)
    t4 = time.perf_counter(); queue_plan(plan); t5 = time.perf_counter()
    make_plan(Space.load("warptile").without_seeds(), p, ev.limits, queued_by_parent=True, **kw)
    t6 = time.perf_counter(); ev.close()
    print(f"import_s {t1-t0:.2f} evaluator_s {t2-t1:.2f} cublas_s {t3-t2:.2f} plan_s {t4-t3:.2f} queue_s {t5-t4:.2f} worker_plan_s {t6-t5:.2f} valid {len(plan.valid)} startup {len(plan.startup)}")
PY
for i in 1 2; do rm -f /tmp/st.db; AUTOTUNE_CACHE=/tmp/atc_probe python3 /tmp/startup_probe.py >> $L/startup.txt 2>&1; done
cat $L/startup.txt
# One search, cold caches (compiles and CuPy's), its own results folder and SQLite study;
# wall time of the whole command; stdout lines stamped with seconds since its start.
one() {
  name=$1; shift
  rm -rf /tmp/res_$name
  s=$EPOCHREALTIME
  AUTOTUNE_CACHE=/tmp/atc_$name CUPY_CACHE_DIR=/tmp/cupy_$name python3 -m autotune search --size 4096 \
    --family warptile --trials 128 --results /tmp/res_$name --yes "$@" 2>&1 \
    | python3 -c 'import sys,time; t=time.monotonic()
for l in sys.stdin: print(f"{time.monotonic()-t:7.2f} {l}", end="", flush=True)' > $L/$name.txt
  rc=${PIPESTATUS[0]}
  e=$EPOCHREALTIME
  echo "$name rc $rc wall_s $(python3 -c "print(round($e - $s, 2))") args $*" | tee -a $L/walls.txt
  cp /tmp/res_$name/*/4096x4096x4096.json $L/$name.result.json 2>/dev/null
}
one cold_s0_w1 --no-seeds --seed 0
one cold_s0_w2 --no-seeds --seed 0 --workers 2
one cold_s1_w2 --no-seeds --seed 1 --workers 2
one cold_s1_w1 --no-seeds --seed 1
el=$(python3 -c "print(int($EPOCHREALTIME - $T0))")
if [ $el -lt 360 ]; then
  one seeded_w1 --seed 0
  one seeded_w2 --seed 0 --workers 2
fi
tar czf $OUT/logs.tar.gz -C $OUT logs
