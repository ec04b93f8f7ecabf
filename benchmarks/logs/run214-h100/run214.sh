# Issue 16, 16 columns: colstage with its copies' addresses walked (6763654). Run 213: 16.0 M
# instructions for 8.4 M FMAs at 16 columns, 33.0-33.4 us. Prediction: 16 columns 31.5-32.5 us,
# 8 columns 29-29.5 us. GPU test, probes (3 rounds) with instruction counts by Nsight Compute for
# the 16-column point, then colstage searched 60 s at 16 and 8 columns (seed 0).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache214
L=$OUT/logs/run214-h100; mkdir -p $L/records
cp run214.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstage > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
P="python3 benchmarks/probe.py --repeat 3"
timeout 150 $P --records 4096x16x4096 --params "colstage NR=16 KL=2 RPW=2 WARPS=8 KSTAGE=256 STAGES=4 KSPLIT=1 ROT=1" \
  --variant "WARPS=16 STAGES=3" --variant "KL=4 RPW=4 WARPS=16 STAGES=3" --variant "KL=4 RPW=4" --variant "KL=8 RPW=8" \
  --variant "KL=4 RPW=2 WARPS=16 STAGES=3" --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -7
timeout 100 $P --records 4096x8x4096 --params "colstage NR=8 KL=2 RPW=2 WARPS=8 KSTAGE=256 STAGES=3 KSPLIT=1 ROT=1" \
  --variant "KL=4 RPW=4 WARPS=16" --out $L/probe8.json > $L/probe8.txt 2>&1
grep -v rounds $L/probe8.txt | tail -3
NCU="timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --kernel-name autotune_sgemm --launch-skip 1 --launch-count 1 --metrics regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
$NCU python3 benchmarks/profile_one.py colstage '{"BATCHED": 0, "KSPLIT": 1, "TRANS_A": 0, "TRANS_B": 0, "KSTAGE": 256, "KL": 2, "RPW": 2, "WARPS": 8, "NR": 16, "STAGES": 4, "ROT": 1}' 4096x16x4096 > $L/ncu_s16rot.txt 2>&1
grep -E "pct|sum" $L/ncu_s16rot.txt | awk '$NF+0 >= 0.5 || /duration|inst|wavefronts/'
timeout 240 python3 -m autotune search --sizes 4096x16x4096,4096x8x4096 --family colstage --timeout 60 --seed 0 --results $L/records > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | tail -14
rm -f $L/records/*/optuna.db* $L/records/*/.autotune.lock
tar czf $OUT/logs.tar.gz -C $OUT logs
