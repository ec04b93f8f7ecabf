# Issue 16, 16 columns: the stall reasons behind run 210's figures (colstream issued an
# instruction every 2.5 cycles a scheduler at 16 columns, 2 warps a scheduler): Nsight Compute's
# per-warp stall shares for the same four kernels, and the instruction cache.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache211
L=$OUT/logs/run211-h100; mkdir -p $L
cp run211.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
NCU="timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --kernel-name autotune_sgemm --launch-skip 1 --launch-count 1 --metrics regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,smsp__cycles_active.avg,gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second"
B='"BATCHED": 0, "KSPLIT": 1, "TRANS_A": 0, "TRANS_B": 0'
run() {
  $NCU python3 benchmarks/profile_one.py colstream "{$B, $2}" $3 > $L/ncu_$1.txt 2>&1
  echo "== $1 $2 $3" >> $L/summary.txt
  grep -E "pct|sum|avg" $L/ncu_$1.txt | awk '$NF+0 >= 0.5 || /duration|cycles|inst|wavefronts|second/' >> $L/summary.txt
}
run c8 '"A_RING": 0, "NR": 8, "RPW": 4, "S": 4, "STAGES": 2, "WARPS": 8' 4096x8x4096
run c16 '"A_RING": 0, "NR": 16, "RPW": 4, "S": 2, "STAGES": 2, "WARPS": 8' 4096x16x4096
run r16 '"A_RING": 1, "NR": 16, "RPW": 4, "S": 2, "STAGES": 4, "WARPS": 8' 4096x16x4096
run r8 '"A_RING": 1, "NR": 8, "RPW": 4, "S": 2, "STAGES": 4, "WARPS": 8' 4096x8x4096
cat $L/summary.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
