# Issue 16, the few-column side: warptile A_ROWS (A's tile kept as stored, 16-byte copies along k,
# a thread's rows LANES_M apart). Prediction: nn at the tn winners' parameters within 5% of their
# tn times of run 187 (8 and 16 columns about 34-35 us, 32 columns about 36 us against the record's
# 43). (1) A_ROWS's GPU test (pitched A, NaN past K); (2) probes: the records with A_ROWS 1, and
# run 187's tn winners as nn A_ROWS kernels, 3 rounds each against cuBLAS; (3) warptile searched
# with A_ROWS in the space (benchmarks/spaces/warptile_a_rows.yaml), 50 s a shape, seed 0.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache188
L=$OUT/logs/run188-h100; mkdir -p $L
cp run188.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 9 -rf tests/gpu/test_layouts_gpu.py -k a_kept > $L/gpu_tests.txt 2>&1
tail -3 $L/gpu_tests.txt
P="timeout 90 python3 benchmarks/probe.py --family warptile --repeat 3"
TN16="--set A_ROWS=1 --set BM=128 --set BN=16 --set BK=32 --set WARPS_M=4 --set WARPS_N=1 --set LANES_N=4 --set TM=4 --set TN=4 --set STAGES=4 --set GROUP_M=64 --set SPLITK=4 --set MINB=2 --set PREFETCH=1 --set MMA_ORDER=1 --set SCHEDULE=data_parallel"
{
$P --records 4096x32x4096 --set A_ROWS=1
$P --records 4096x16x4096 --shapes 4096x16x4096,4096x8x4096 $TN16
$P --records 4096x128x4096 --set A_ROWS=1
} > $L/probe.txt 2>&1
grep -vE "^\[" $L/probe.txt | grep -E "rounds|record|A_ROWS|geometric|rejected"
mkdir -p /tmp/res188
timeout 300 python3 -m autotune search --sizes 4096x8x4096,4096x16x4096,4096x32x4096,4096x128x4096 --family warptile \
    --config benchmarks/spaces/warptile_a_rows.yaml --timeout 50 --seed 0 --results /tmp/res188 > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9_]+ +[0-9]|took|wrote|cuBLAS [0-9]|x cuBLAS"
mkdir -p $L/records; cp /tmp/res188/nvidia-h100-80gb-hbm3/*.json $L/records/ 2>/dev/null
tar czf $OUT/logs.tar.gz -C $OUT logs
