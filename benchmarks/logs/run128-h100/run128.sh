#!/usr/bin/env bash
# Run 128: Nsight Compute (full set) of medium's 4096^3 records in nn and nt against cuBLAS TF32,
# and of fewrows at 1x4096x4096 against cuBLAS's two paths: where each loses its last per cent.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD AUTOTUNE_CACHE=/tmp/atcache PYTHONUNBUFFERED=1 CUPY_TF32=0
L=$OUT/logs/run128-h100; mkdir -p $L; cp run128.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
NCU="timeout 150 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --set full --launch-skip 3 --launch-count 2"
prof() {  # name family params shape
  echo "== $1: $2 $3 $4" | tee -a $L/summary.txt
  $NCU python3 benchmarks/profile_one.py "$2" "$3" "$4" > $L/ncu_$1.txt 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Bank|Shared Memory|Tensor|Block Limit|Waves Per SM|Grid Size|Block Size|'time_ms'" $L/ncu_$1.txt | head -60 >> $L/summary.txt
}
rec() { python3 -c "
import json
d=json.load(open('results/nvidia-h100-80gb-hbm3/$1.json'))
f,e=max(((f,e) for f,e in d['families'].items() if e['status']=='ok'), key=lambda kv: kv[1]['ratio'])
print(f); print(json.dumps(e['config']['params']))"; }
for r in 4096x4096x4096_medium 4096x4096x4096_nt_medium 1x4096x4096; do
  mapfile -t fp < <(rec $r); prof $r "${fp[0]}" "${fp[1]}" $r
done
prof cublas_tf32_nn cublas gemm_tf32 4096x4096x4096_medium
prof cublas_tf32_nt cublas gemm_tf32 4096x4096x4096_nt_medium
prof cublas_gemv_matmul cublas matmul 1x4096x4096
prof cublas_gemv_gemm cublas gemm 1x4096x4096
tar czf $OUT/logs.tar.gz -C $OUT logs
