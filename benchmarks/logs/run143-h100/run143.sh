set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run143-h100; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
# A search process's start-up, phase by phase (inputs of a scaling simulation); a file, as the
# GPU worker process is spawned and re-imports __main__.
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
    plan = make_plan(Space.load("warptile").without_seeds(), p, ev.limits, gpu_slug=ev.limits.slug, storage="sqlite:////tmp/st.db", trials=128)
    t4 = time.perf_counter(); queue_plan(plan); t5 = time.perf_counter(); ev.close()
    print(f"import_s {t1-t0:.2f} evaluator_s {t2-t1:.2f} cublas_s {t3-t2:.2f} plan_s {t4-t3:.2f} queue_s {t5-t4:.2f} valid {len(plan.valid)} startup {len(plan.startup)}")
PY
for i in 1 2; do rm -f /tmp/st.db; python3 /tmp/startup_probe.py >> $L/startup.txt 2>&1; done
cat $L/startup.txt
timeout 540 python3 benchmarks/vs_kernel_tuner.py --family warptile --size 4096 --fevals 30 --repeats 2 --first-repeat 1 \
  --strategies hybrid_vndx,random_sample --optimum-from benchmarks/logs/run142-h100/kt_warptile_rep0.json \
  --out $L/kt_warptile_rep1-2.json > $L/kt_warptile_rep1-2.txt 2>&1
echo "rc $?"
tail -12 $L/kt_warptile_rep1-2.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
