#!/usr/bin/env bash
# Measurements on a lent GPU machine, run from the repository root there:
#
#   bash benchmarks/device.sh TASK [ARG] [TASK [ARG]...]
#
#   gpu-tests        python -m pytest tests/device -> logs/gpu_tests.txt
#   gpu-shard K/N    python -m pytest tests/device --shard K/N (one of N shards, each well inside a
#                    call's 10 minutes; every shard shares one compile cache) -> logs/gpu_shard_K_of_N.txt
#   gpu-suite [N]    the whole GPU suite in one call: its N shards (8) at the same time, sharing
#                    the GPU, the cores and one compile cache; prints each shard's closing line -> logs/gpu_shard_K_of_N.txt
#   fuzz N [SEED]    autotune fuzz --problems N --seed SEED (0): N random problems through
#                    autotune.matmul and every stored kernel in each form -> logs/fuzz_SEED.txt
#   ozaki            the Ozaki/INT8 GPU tests, the check's and the route's included (each file under
#                    a timeout: a kernel that hangs costs minutes, not the call), then
#                    benchmarks/ozaki_gpu.py (4096 and 8192, 6-8 moduli, each stage's time) -> logs/ozaki_{tests,gpu}.txt
#   cache            pack the compile cache into $OUT/cache.tar.xz (carry it as .fuzzcache.tar.xz)
#   pytorch          autotune.pytorch on the device: its GPU tests, benchmarks/pytorch_layer.py (host
#                    time per call, torch beside it), examples/pytorch_mlp.py -> logs/pytorch_{tests,layer,mlp}.txt
#   linear-tune [SEC] benchmarks/pytorch_linear.py --record: the GEMMs of the example's layers and of a
#                    seeded draw of 10 linear layers, then `autotune search --shapes-file` of them,
#                    SEC per shape (10); each record to $OUT/results/<gpu>/ -> logs/linear_{shapes,tune}.txt
#   linear           benchmarks/pytorch_linear.py: those layers' forward + backward, autotune's Linear
#                    against nn.Linear, eager and compiled -> logs/linear.{txt,json}
#   dispatch         benchmarks/dispatch.py: host time per call of matmul, the loaded kernel,
#                    cupy.matmul, torch -> logs/dispatch.{txt,json}
#   sweep [TRIALS]   benchmarks/sweep.py, warptile, TRIALS per shape (40) -> logs/sweep.{txt,json}
#   skinny [TRIALS]  benchmarks/bandwidth.py, then sweep.py --set skinny with the few-rows and
#                    few-columns families, TRIALS per shape (30) -> logs/bandwidth.json, logs/skinny.{txt,json}
#   small [TRIALS]   sweep.py --set small --family all --skip-tuned: the small-shape set's shapes this
#                    GPU has no record of, TRIALS per family (30); each record copied to
#                    $OUT/results/<gpu>/ as soon as it is written -> logs/small.{txt,json}
#   layouts [TRIALS] sweep.py --set layouts: warptile for A @ B.T, A.T @ B and A.T @ B.T at 4096^3
#                    and 8192x8192x1024, TRIALS per shape (30) -> logs/layouts.{txt,json}
#   batches [TRIALS] sweep.py --set batches: warptile on strided batches (512^3 x 64, 2048^3 x 8,
#                    ...), TRIALS per shape (30) -> logs/batches.{txt,json}
#   untuned          benchmarks/untuned.py: autotune.matmul's choice (the model) and the nearest
#                    tuned shape's winner on 20 shapes not tuned, vs cuBLAS -> logs/untuned.{txt,json}
#   header-tuned     benchmarks/header_tuned.py: the exported library (built here, with its cuBLAS
#                    timing) against autotune.matmul at every tuned shape -> logs/header_tuned.{txt,json}
#   search4096       default `autotune search --size 4096`, empty results folder and cold compile
#                    cache, wall time included -> logs/search4096_fresh.txt
#   check GPU        autotune check --gpu GPU (re-verify, re-time) -> logs/check.txt
#   family F [SEC]   `search --family F --timeout SEC` (30) of every strict-FP32 record of this GPU that
#                    F suits (a new family against the records); each record to $OUT/results/<gpu>/ -> logs/family_F.txt
#   weak [RATIO [SEC]] `search --timeout SEC` (45), all families, of this GPU's strict-FP32 records whose
#                    best runs below RATIO x cuBLAS (1.0), the weakest first, as many as the call's time
#                    allows; each record to $OUT/results/<gpu>/ -> logs/weak.txt
#   sass             benchmarks/sass_report.py --size 4096 -> logs/sass4096.json
#   compile-stress   benchmarks/compile_stress.py (200 parallel compiles, fresh processes) -> logs/compile_stress.txt
#   wheel            the autotune wheel carried in .dist/, installed outside the checkout:
#                    `autotune list`, then the default `autotune search --size 4096` into this
#                    checkout's results/ (merged like any search) -> logs/wheel.txt
#
# Needs the Python wheels in .whl/ (carried), and $OUT, the folder that comes back; CALL_SECONDS
# (600) is the call's limit, so that the last task stops in time to pack what it made. Every task
# writes its log under $OUT/logs/ and prints one summary line; the sweep's results files go to
# $OUT/results/<gpu>/. At the end all of it is packed into $OUT/logs.tar.gz, since only a few
# files come back one by one; add a row with its figures to benchmarks/logs/INDEX.md, and commit
# its raw files under benchmarks/logs/run<N>-<gpu>/ only where small and cited (INDEX.md says
# why). Tasks run in the order given; one failing does not stop the next.
set -u
usage() { sed -n '2,/^# Needs/p' "$0" | sed '$d'; exit 2; }
[ $# -gt 0 ] || usage
for ((i = 1; i <= $#; i++)); do  # check every task before anything is installed or run
  case ${!i} in
    gpu-suite) j=$((i + 1)); [[ ${!j:-} =~ ^[0-9]+$ ]] && i=$j ;;
    gpu-tests|ozaki|pytorch|dispatch|untuned|header-tuned|search4096|sass|compile-stress|wheel|cache) ;;
    gpu-shard) i=$((i + 1)); [[ ${!i:-} =~ ^[0-9]+/[0-9]+$ ]] || { echo "gpu-shard needs K/N" >&2; usage; } ;;
    fuzz) i=$((i + 1)); [[ ${!i:-} =~ ^[0-9]+$ ]] || { echo "fuzz needs a count" >&2; usage; }
      j=$((i + 1)); [[ ${!j:-} =~ ^[0-9]+$ ]] && i=$j ;;
    sweep|skinny|small|layouts|batches|linear-tune) j=$((i + 1)); [[ ${!j:-} =~ ^[0-9]+$ ]] && i=$j ;;
    linear) ;;
    weak) j=$((i + 1)); if [[ ${!j:-} =~ ^[0-9]+(\.[0-9]+)?$ ]]; then i=$j
        j=$((i + 1)); [[ ${!j:-} =~ ^[0-9]+$ ]] && i=$j; fi ;;
    check) i=$((i + 1)); [ -n "${!i:-}" ] || { echo "check needs a GPU name (check nvidia-h200)" >&2; usage; } ;;
    family) i=$((i + 1)); [[ ${!i:-} =~ ^[a-z0-9_]+$ ]] || { echo "family needs a family name" >&2; usage; }
      j=$((i + 1)); [[ ${!j:-} =~ ^[0-9]+$ ]] && i=$j ;;
    *) echo "unknown task '${!i}'" >&2; usage ;;
  esac
done
: "${OUT:?set OUT to the folder that comes back}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE=/tmp/atcache AUTOTUNE_TEST_CACHE=/tmp/atcache CUPY_CACHE_DIR=/tmp/cupycache
# The compile caches (autotune's and CuPy's) carried from an earlier call's `cache` task.
[ -f .fuzzcache.tar.xz ] && tar xJf .fuzzcache.tar.xz -C /tmp
# Seconds left of the call (CALL_SECONDS, 600: pass the run's timeout_s when it is shorter), less
# a margin for packing the logs: a call cut off before the packing brings back only a few files.
[[ ${CALL_SECONDS:-600} =~ ^[0-9]+$ ]] || { echo "CALL_SECONDS must be a number of seconds" >&2; exit 2; }
START=$(date +%s)
left() { echo $((${CALL_SECONDS:-600} - 30 - ($(date +%s) - START))); }
L=$OUT/logs
mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv \
  > "$L/gpu.txt" 2>&1
echo "bash benchmarks/device.sh $*" > "$L/command.txt"

elapsed() { python3 -c "import time; print(round(time.time() - $1, 1))"; }

# search_records WHICH SEC LOG [search args...]: `search --shapes-file` of this GPU's strict-FP32
# records (beta 0) that WHICH picks -- family:F those F suits, below:R those whose best runs below
# R x cuBLAS, weakest first -- SEC each, into logs/LOG.txt; then each record to $OUT/results/<gpu>/.
search_records() {
  local which=$1 sec=$2 log=$3; shift 3
  slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
  python3 - "$which" "$slug" > /tmp/records.txt <<'PY'
import sys
from autotune.core.types import Problem
from autotune.kernels.family import Family
from autotune.records.results import iter_records
kind, _, arg = sys.argv[1].partition(":")
fam = Family.load(arg) if kind == "family" else None
picked = []
for path, rec in iter_records("results", sys.argv[2]):
    problem = Problem(**rec["problem"])
    if problem.precision != "highest" or problem.beta != 0:
        continue
    if fam is not None and not fam.unsuited(problem):
        picked.append((0, path.stem))
    ratio = rec["families"].get(rec.get("best"), {}).get("ratio")
    if kind == "below" and ratio is not None and ratio < float(arg):
        picked.append((ratio, path.stem))
print("\n".join(stem for _, stem in sorted(picked)))
PY
  timeout "$(left)" python3 -m autotune.cli search --shapes-file /tmp/records.txt --timeout "$sec" --yes "$@" \
    > "$L/$log.txt" 2>&1
  echo "exit $?" >> "$L/$log.txt"
  mkdir -p "$OUT/results/$slug" && while read -r shape; do cp "results/$slug/$shape.json" "$OUT/results/$slug/"; done < /tmp/records.txt
}

while [ $# -gt 0 ]; do
  task=$1; shift
  if [ "$task" != cache ] && [ "$(left)" -lt 20 ]; then
    echo "$task: skipped, the call's time is spent"
    while [[ ${1:-} =~ ^[0-9/]+$ ]]; do shift; done  # and its arguments
    continue
  fi
  case $task in
    gpu-tests)
      timeout 540 python3 -m pytest -q -p no:cacheprovider tests/device > "$L/gpu_tests.txt" 2>&1
      echo "exit $?" >> "$L/gpu_tests.txt"
      echo "gpu-tests: $(grep -E 'passed|failed|error' "$L/gpu_tests.txt" | tail -1)" ;;
    gpu-shard)
      shard=$1; shift; name=gpu_shard_${shard/\//_of_}
      timeout "$(left)" python3 -m pytest -q -p no:cacheprovider --durations=15 tests/device --shard "$shard" > "$L/$name.txt" 2>&1
      echo "exit $?" >> "$L/$name.txt"
      echo "gpu-shard $shard: $(grep -E 'passed|failed|error' "$L/$name.txt" | tail -1)" ;;
    gpu-suite)
      n=8
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then n=$1; shift; fi
      s=$(date +%s.%N)
      for k in $(seq 1 "$n"); do
        name=gpu_shard_${k}_of_$n
        ( timeout "$(left)" python3 -m pytest -q -p no:cacheprovider --durations=15 tests/device --shard "$k/$n" \
            > "$L/$name.txt" 2>&1; echo "exit $?" >> "$L/$name.txt" ) &
      done
      wait
      echo "gpu-suite: $n shards at once, wall $(elapsed "$s") s"
      for k in $(seq 1 "$n"); do
        echo "  shard $k/$n: $(grep -E 'passed|failed|error' "$L/gpu_shard_${k}_of_$n.txt" | tail -1)"
      done ;;
    fuzz)
      count=$1; shift; seed=0
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then seed=$1; shift; fi
      s=$(date +%s.%N)
      timeout "$(left)" python3 -m autotune.cli fuzz --problems "$count" --seed "$seed" --shrink 1 --seconds $(($(left) - 60)) \
        > "$L/fuzz_$seed.txt" 2>&1
      echo "exit $? wall $(elapsed "$s") s" >> "$L/fuzz_$seed.txt"
      echo "fuzz $count seed $seed: $(grep -E '^fuzz: [0-9]+ problems' "$L/fuzz_$seed.txt") $(tail -1 "$L/fuzz_$seed.txt")" ;;
    cache)  # in 15-MB parts (what comes back is at most 16 MB a file): cat them into .fuzzcache.tar.xz
      tar cJf - -C /tmp atcache $([ -d /tmp/cupycache ] && echo cupycache) | split -b 15M - "$OUT/cache.tar.xz.part-"
      echo "cache: $(ls /tmp/atcache/nvrtc | wc -l) files, $(du -ch "$OUT"/cache.tar.xz.part-* | tail -1 | cut -f1)" ;;
    ozaki)
      for f in test_ozaki_int8_gpu test_ozaki_passes_gpu test_ozaki_gpu test_ozaki_guard_gpu test_ozaki_element_gpu test_ozaki_route_gpu; do
        timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 "tests/device/$f.py" >> "$L/ozaki_tests.txt" 2>&1
        echo "$f exit $?" >> "$L/ozaki_tests.txt"
      done
      timeout 150 python3 benchmarks/ozaki_gpu.py --sizes 4096 8192 --moduli 6 7 8 --kernels wgmma_tma wgmma \
        > "$L/ozaki_gpu.txt" 2>&1
      echo "exit $?" >> "$L/ozaki_gpu.txt"
      echo "ozaki: $(grep -E 'passed|failed|exit' "$L/ozaki_tests.txt" | tr '\n' ' ')"
      grep -E '^[0-9]+\^3' "$L/ozaki_gpu.txt" | cut -c1-150 ;;
    pytorch)
      timeout "$(left)" python3 -m pytest -q -p no:cacheprovider --durations=10 tests/device/test_pytorch_gpu.py \
        > "$L/pytorch_tests.txt" 2>&1
      echo "exit $?" >> "$L/pytorch_tests.txt"
      timeout 240 python3 benchmarks/pytorch_layer.py --out "$L/pytorch_layer.json" > "$L/pytorch_layer.txt" 2>&1
      echo "exit $?" >> "$L/pytorch_layer.txt"
      timeout 240 python3 examples/pytorch_mlp.py > "$L/pytorch_mlp.txt" 2>&1
      echo "exit $?" >> "$L/pytorch_mlp.txt"
      echo "pytorch: tests $(tail -2 "$L/pytorch_tests.txt" | tr '\n' ' '); layer $(python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(d.get('native'), d['host_us'])" "$L/pytorch_layer.json" 2>&1 | tail -1); mlp $(tail -2 "$L/pytorch_mlp.txt" | tr '\n' ' ')" ;;
    linear-tune)
      sec=10
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then sec=$1; shift; fi
      slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
      timeout 120 python3 benchmarks/pytorch_linear.py --record "$L/linear_shapes.txt" > "$L/linear_record.txt" 2>&1
      timeout "$(left)" python3 -m autotune.cli search --shapes-file "$L/linear_shapes.txt" --timeout "$sec" --yes \
        --family warptile fewrows fewcols tiny --priors nvidia-h100-80gb-hbm3 > "$L/linear_tune.txt" 2>&1
      echo "exit $?" >> "$L/linear_tune.txt"
      mkdir -p "$OUT/results/$slug" && cp results/"$slug"/*.json "$OUT/results/$slug/"
      echo "linear-tune ($sec s a shape): $(tail -1 "$L/linear_record.txt"); $(grep -c 'cuBLAS' "$L/linear_tune.txt") result lines, $(tail -1 "$L/linear_tune.txt")" ;;
    linear)
      timeout "$(left)" python3 benchmarks/pytorch_linear.py --out "$L/linear.json" > "$L/linear.txt" 2>&1
      echo "exit $?" >> "$L/linear.txt"
      echo "linear: $(grep -E 'geomean|exit' "$L/linear.txt" | tr '\n' ' ')" ;;
    dispatch)
      timeout 300 python3 benchmarks/dispatch.py --out "$L/dispatch.json" > "$L/dispatch.txt" 2>&1
      echo "exit $?" >> "$L/dispatch.txt"
      echo "dispatch: $(grep -E 'overhead|exit' "$L/dispatch.txt" | tr '\n' ' ')" ;;
    untuned)
      timeout 540 python3 benchmarks/untuned.py --out "$L/untuned.json" > "$L/untuned.txt" 2>&1
      echo "exit $?" >> "$L/untuned.txt"
      echo "untuned: $(grep -E 'geometric|exit' "$L/untuned.txt" | tr '\n' ' ')" ;;
    header-tuned)
      timeout "$(left)" python3 benchmarks/header_tuned.py --out "$L/header_tuned.json" > "$L/header_tuned.txt" 2>&1
      echo "exit $?" >> "$L/header_tuned.txt"
      echo "header-tuned: $(grep -E 'tuned shapes|exit' "$L/header_tuned.txt" | tr '\n' ' ')" ;;
    sweep)
      trials=40
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then trials=$1; shift; fi
      timeout 540 python3 benchmarks/sweep.py --trials "$trials" --out "$L/sweep.json" > "$L/sweep.txt" 2>&1
      echo "exit $?" >> "$L/sweep.txt"
      slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
      mkdir -p "$OUT/results/$slug" && cp results/"$slug"/*.json "$OUT/results/$slug/"  # to copy into the repository
      echo "sweep ($trials trials): $(grep -E 'geometric|exit' "$L/sweep.txt" | head -1)" ;;
    skinny)
      trials=30
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then trials=$1; shift; fi
      timeout 60 python3 benchmarks/bandwidth.py > "$L/bandwidth.json" 2>&1
      timeout 540 python3 benchmarks/sweep.py --set skinny --family fewrows fewcols --trials "$trials" --out "$L/skinny.json" \
        > "$L/skinny.txt" 2>&1
      echo "exit $?" >> "$L/skinny.txt"
      slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
      mkdir -p "$OUT/results/$slug" && cp results/"$slug"/*.json "$OUT/results/$slug/"
      echo "skinny ($trials trials): $(cat "$L/bandwidth.json") $(grep -E 'geometric|exit' "$L/skinny.txt" | head -1)" ;;
    small)
      trials=30
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then trials=$1; shift; fi
      slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
      timeout 540 python3 benchmarks/sweep.py --set small --family all --skip-tuned --trials "$trials" \
        --copy-to "$OUT/results/$slug" --out "$L/small.json" > "$L/small.txt" 2>&1
      echo "exit $?" >> "$L/small.txt"
      echo "small ($trials trials): $(grep -c ' TFLOP/s  cuBLAS' "$L/small.txt") shapes tuned, $(grep -E 'geometric|exit' "$L/small.txt" | head -1)" ;;
    layouts|batches)
      set_name=$task trials=30
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then trials=$1; shift; fi
      timeout 540 python3 benchmarks/sweep.py --set "$set_name" --trials "$trials" --out "$L/$set_name.json" \
        > "$L/$set_name.txt" 2>&1
      echo "exit $?" >> "$L/$set_name.txt"
      slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
      mkdir -p "$OUT/results/$slug" && cp results/"$slug"/*.json "$OUT/results/$slug/"
      echo "$set_name ($trials trials): $(grep -E 'geometric|exit' "$L/$set_name.txt" | head -1)" ;;
    search4096)
      rm -rf /tmp/fresh /tmp/fresh-cache
      s=$(date +%s.%N)
      AUTOTUNE_CACHE=/tmp/fresh-cache timeout 300 python3 -m autotune.cli search --size 4096 --results /tmp/fresh \
        > "$L/search4096_fresh.txt" 2>&1
      rc=$?
      echo "autotune search --size 4096 (empty results, cold cache): exit $rc wall $(elapsed "$s") s" \
        | tee -a "$L/search4096_fresh.txt" ;;
    check)
      gpu=$1; shift
      timeout 300 python3 -m autotune.cli check --gpu "$gpu" > "$L/check.txt" 2>&1
      echo "exit $?" >> "$L/check.txt"
      echo "check $gpu: $(tail -2 "$L/check.txt" | tr '\n' ' ')" ;;
    family)
      fam=$1; shift; sec=30
      if [[ ${1:-} =~ ^[0-9]+$ ]]; then sec=$1; shift; fi
      search_records "family:$fam" "$sec" family_$fam --family "$fam"
      echo "family $fam: $(wc -l < /tmp/records.txt) shapes; $(grep -c "^$fam " "$L/family_$fam.txt") searched" ;;
    weak)
      ratio=1.0; sec=45
      if [[ ${1:-} =~ ^[0-9]+(\.[0-9]+)?$ ]]; then ratio=$1; shift
        if [[ ${1:-} =~ ^[0-9]+$ ]]; then sec=$1; shift; fi; fi
      search_records "below:$ratio" "$sec" weak
      echo "weak: $(wc -l < /tmp/records.txt) records below ${ratio}x; $(grep -c '^wrote ' "$L/weak.txt") searched" ;;
    sass)
      timeout 120 python3 benchmarks/sass_report.py --size 4096 > "$L/sass4096.json" 2>&1
      echo "sass: $(grep -E '"(config|registers|spill_bytes|loop_ffma_share)"' "$L/sass4096.json" | tr -d ' \n')" ;;
    compile-stress)
      { python3 benchmarks/compile_stress.py --versions; timeout 300 python3 benchmarks/compile_stress.py; } \
        > "$L/compile_stress.txt" 2>&1
      echo "exit $?" >> "$L/compile_stress.txt"
      echo "compile-stress: $(tail -2 "$L/compile_stress.txt" | tr '\n' ' ')" ;;
    wheel)
      # Only the wheel and the carried dependencies on the path: nothing of the checkout.
      results=$PWD/results
      rm -rf /tmp/wheelsite && python3 -m pip install -q --no-index --no-deps --target /tmp/wheelsite .dist/autotune-*.whl
      s=$(date +%s.%N)
      (cd /tmp && PYTHONPATH=/tmp/wheelsite:/tmp/site AUTOTUNE_CACHE=/tmp/wheel-cache \
        python3 -c "import autotune, sys; print('autotune from', autotune.__file__)" \
        && PYTHONPATH=/tmp/wheelsite:/tmp/site python3 -m autotune.cli list \
        && PYTHONPATH=/tmp/wheelsite:/tmp/site AUTOTUNE_CACHE=/tmp/wheel-cache timeout 300 \
           python3 -m autotune.cli search --size 4096 --results "$results") > "$L/wheel.txt" 2>&1
      rc=$?
      echo "wheel: autotune list + search --size 4096 from the wheel: exit $rc wall $(elapsed "$s") s" \
        | tee -a "$L/wheel.txt"
      slug=$(python3 -c "from autotune.records.results import live_gpu_slug; print(live_gpu_slug())")
      mkdir -p "$OUT/results/$slug" && cp results/"$slug"/*.json "$OUT/results/$slug/" ;;
  esac
done
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs $([ -d "$OUT/results" ] && echo results) && rm -rf "$OUT/logs" "$OUT/results"
