# Issue 16: fewcols with a row block's column groups side by side in the grid (COLS_FIRST).
# (1) its GPU tests; (2) the 16-column record with its groups side by side, at 8/16/32 columns,
# against the record as it is, 3 rounds each; (3) a search of benchmarks/spaces/fewcols_cols_first.yaml
# at 4096 x {32, 16, 8} x 4096 (60 s, seed 12) and fewcols' default space at 32 columns (60 s);
# (4) what a write-only stream of C reaches (the K <= 16 shapes store a 64-MB C).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache179
L=$OUT/logs/run179-h100; mkdir -p $L
cp run179.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 12 -rf tests/gpu/test_correctness.py -k "b_through_the_ring" > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
P="python3 benchmarks/probe.py --records 4096x16x4096 --shapes 4096x16x4096,4096x32x4096,4096x8x4096 --repeat 3"
timeout 120 $P --set COLS_FIRST=1 > $L/probe_nr16.txt 2>&1
timeout 120 $P --set COLS_FIRST=1 --set NR=8 > $L/probe_nr8.txt 2>&1
timeout 120 $P --set COLS_FIRST=1 --set NR=16 --set KCHUNK=2048 > $L/probe_nr16_k2048.txt 2>&1
cat $L/probe_*.txt | grep -vE "^\[" | head -60
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
R="--seed 12 --results /tmp/resc"
timeout 330 python3 -m autotune search --sizes 4096x32x4096,4096x16x4096,4096x8x4096 --family fewcols --config benchmarks/spaces/fewcols_cols_first.yaml --timeout 60 $R > $L/search_cols_first.txt 2>&1
timeout 110 python3 -m autotune search --sizes 4096x32x4096 --family fewcols --timeout 60 $R > $L/search_default_32.txt 2>&1
for f in $L/search_*.txt; do grep -vE "^\[" $f | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"; done
mkdir -p $L/records; for s in 4096x32x4096 4096x16x4096 4096x8x4096; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
timeout 60 python3 - > $L/write_stream.txt 2>&1 <<'PY'
import cupy as cp
k = cp.RawKernel(r'''extern "C" __global__ void w(float4* p, long n4, float v) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x)
    p[i] = make_float4(v, v, v, v);
}''', "w")
for mb in (64, 256):
    n4 = mb * 2**20 // 16
    bufs = [cp.empty(n4 * 4, cp.float32) for _ in range(3)]
    for blocks in (264, 528, 1056, 4096):
        ts = []
        for r in range(30):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(); k((blocks,), (256,), (bufs[r % 3], cp.int64(n4), cp.float32(r))); b.record(); b.synchronize()
            ts.append(cp.cuda.get_elapsed_time(a, b))
        ts.sort()
        print(f"write {mb} MB, {blocks} blocks of 256: median {ts[15]*1e3:.1f} us ({mb*2**20/ts[15]/1e9:.0f} GB/s), min {ts[0]*1e3:.1f} us")
    ts = []
    for r in range(30):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); bufs[r % 3].fill(0); b.record(); b.synchronize(); ts.append(cp.cuda.get_elapsed_time(a, b))
    ts.sort(); print(f"memset {mb} MB: median {ts[15]*1e3:.1f} us ({mb*2**20/ts[15]/1e9:.0f} GB/s)")
PY
cat $L/write_stream.txt
tar czf $OUT/logs.tar.gz -C $OUT logs
