# Issue 16, 16 columns: colstage with ROT (block b walks its stages from b % nst on, so the blocks
# running together copy different rows of B). Run 212: colstage 33.6 us at 16 columns (KL 2, RPW
# 2, 8 warps, 4 stages), 29.7 us at 8; every block then reads the same 16 KB of B from L2 at the
# same time (B is a third of what an SM copies at 16 columns). Prediction: ROT at 16 columns
# 31-32 us if that contention costs, else unchanged. GPU test, probes (3 rounds), then Nsight
# Compute metrics (L2, DRAM, stalls) of the 16-column point with ROT 0 / 1 and the 8-column one.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache213
L=$OUT/logs/run213-h100; mkdir -p $L
cp run213.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_correctness.py -k colstage > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
P="python3 benchmarks/probe.py --repeat 3"
timeout 150 $P --records 4096x16x4096 --params "colstage NR=16 KL=2 RPW=2 WARPS=8 KSTAGE=256 STAGES=4 KSPLIT=1" \
  --variant "ROT=1" --variant "WARPS=16 STAGES=3" --variant "WARPS=16 STAGES=3 ROT=1" --variant "KL=4 RPW=4 ROT=1" \
  --out $L/probe16.json > $L/probe16.txt 2>&1
grep -v rounds $L/probe16.txt | tail -6
timeout 100 $P --records 4096x8x4096 --params "colstage NR=8 KL=2 RPW=2 WARPS=8 KSTAGE=256 STAGES=3 KSPLIT=1" \
  --variant "ROT=1" --out $L/probe8.json > $L/probe8.txt 2>&1
grep -v rounds $L/probe8.txt | tail -3
NCU="timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --kernel-name autotune_sgemm --launch-skip 1 --launch-count 1 --metrics regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__cycles_elapsed.avg.per_second"
B='"BATCHED": 0, "KSPLIT": 1, "TRANS_A": 0, "TRANS_B": 0, "KSTAGE": 256, "KL": 2, "RPW": 2, "WARPS": 8'
run() {
  $NCU python3 benchmarks/profile_one.py colstage "{$B, $2}" $3 > $L/ncu_$1.txt 2>&1
  echo "== $1 $2 $3" >> $L/summary.txt
  grep -E "pct|sum|avg" $L/ncu_$1.txt | awk '$NF+0 >= 0.5 || /duration|cycles|inst|wavefronts|second|bytes|sectors/' >> $L/summary.txt
}
run s16 '"NR": 16, "STAGES": 4, "ROT": 0' 4096x16x4096
run s16rot '"NR": 16, "STAGES": 4, "ROT": 1' 4096x16x4096
run s8 '"NR": 8, "STAGES": 3, "ROT": 0' 4096x8x4096
cat $L/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
