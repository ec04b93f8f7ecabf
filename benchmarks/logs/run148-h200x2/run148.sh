set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run148-h200x2; mkdir -p $L
cp run148.sh $L/
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
nproc >> $L/gpu.txt
lscpu > $L/lscpu.txt; free -g >> $L/lscpu.txt
# 1. The host's compile throughput: P processes x T threads, the same 64 warptile compiles.
python3 benchmarks/compile_throughput.py --compiles 64 --settings 1x8,2x8,1x16,2x16,1x32 2>&1 | tee $L/compile_throughput.txt
# 2. One search, cold caches, its own results folder and SQLite study; wall time of the whole
# command; stdout stamped with seconds since its start; the study's per-trial timeline after.
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
  python3 benchmarks/scaling.py timeline sqlite:///$(ls /tmp/res_$name/*/optuna.db) > $L/$name.timeline.txt 2>&1
  mkdir -p $OUT/db; cp /tmp/res_$name/*/optuna.db $OUT/db/$name.db
}
one cold_s0_w1 --no-seeds --seed 0
one cold_s0_w2 --no-seeds --seed 0 --workers 2
one cold_s0_w2_win16 --no-seeds --seed 0 --workers 2 --window 16
one cold_s0_w1_win16 --no-seeds --seed 0 --window 16
tar czf $OUT/logs.tar.gz -C $OUT logs
