#!/usr/bin/env bash
# Run 92: ncu of the stored warptile winners at 4096^3 in each layout, and at 4096x32x4096 / 4096x128x4096.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L; cp run92.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
for rec in 4096x4096x4096 4096x4096x4096_nt 4096x4096x4096_tt 4096x4096x4096_tn 4096x32x4096 4096x128x4096; do
  params=$(python3 -c "
import json,sys
d=json.load(open('results/nvidia-h100-80gb-hbm3/$rec.json'))
f,e=max(((f,e) for f,e in d['families'].items() if e['status']=='ok'), key=lambda kv: kv[1]['ratio'])
print(f, json.dumps(e['config']['params']))")
  fam=${params%% *}; p=${params#* }
  echo "== $rec $fam $p" | tee -a $L/summary.txt
  timeout 100 /usr/local/cuda/bin/ncu --clock-control none --kernel-name regex:autotune --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --metrics smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio \
    python3 benchmarks/profile_one.py $fam "$p" $rec > $L/ncu_$rec.txt 2>&1
  grep -E "Duration|Throughput|Stall|Issue Slots|Issued Ipc|pipe_lsu|inst_executed.sum|bank_conflicts|throttle|Warp Cycles Per Issued|No Eligible|Registers|Achieved Occupancy" $L/ncu_$rec.txt | head -40 >> $L/summary.txt
done
tar czf $OUT/logs.tar.gz -C $OUT logs
