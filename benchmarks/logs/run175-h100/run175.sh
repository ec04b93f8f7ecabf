# Issue 16: fewcols with B through the ring and the whole of K in one chunk (no launch that
# scales C, no atomics), blocks of 32 rows with long stages: benchmarks/spaces/fewcols_one_chunk.yaml
# grid-sampled (shuffled, seed 8) for 100 s a shape at 4096 x {16, 32, 8} x 4096, into a copy of
# results/; every trial dumped.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache175
L=$OUT/logs/run175-h100; mkdir -p $L
cp run175.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
S=4096x16x4096,4096x32x4096,4096x8x4096
timeout 420 python3 -m autotune search --sizes $S --family fewcols --config benchmarks/spaces/fewcols_one_chunk.yaml \
  --sampler grid --timeout 100 --seed 8 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^fewcols|took|wrote|cuBLAS [0-9]"
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
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["value"]]
for shape in ("4096x16x4096", "4096x32x4096", "4096x8x4096"):
    rs = sorted((r for r in rows if shape in r["study"]), key=lambda r: -r["value"])
    print(shape, len(rs), "measured")
    for r in rs[:6]:
        p = r["params"]
        print("  ", round(r["value"]), {k: p.get(k) for k in ("NR", "WARPS", "WK", "UNROLL", "A_STAGES", "STREAM", "KCHUNK")})
PY
mkdir -p $L/records; for s in ${S//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
