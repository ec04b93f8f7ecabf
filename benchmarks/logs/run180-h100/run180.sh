# Issue 16: warptile's split_cluster schedule (split-K met in a cluster's distributed shared memory).
# (1) the GPU tests of every family at the awkward shapes (split_cluster variants among them);
# (2) the records at 128x4096x4096, 4096x128x4096, 64x4096x4096 with their tiles as split_cluster,
# 3 rounds each against cuBLAS, and one at beta 3; (3) benchmarks/spaces/warptile_split_cluster.yaml
# searched 45 s a shape (seed 13) at the three.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache180
L=$OUT/logs/run180-h100; mkdir -p $L
cp run180.sh $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 12 -rf tests/gpu/test_correctness.py -k "all_families" > $L/gpu_tests.txt 2>&1
tail -5 $L/gpu_tests.txt
P="python3 benchmarks/probe.py --repeat 3"
timeout 60 $P --records 128x4096x4096 --set SCHEDULE=split_cluster --set SPLITK=8 > $L/probe_128rows.txt 2>&1
timeout 60 $P --records 128x4096x4096 --set SCHEDULE=split_cluster --set SPLITK=8 --beta 3 > $L/probe_128rows_beta3.txt 2>&1
timeout 60 $P --records 4096x128x4096 --set SCHEDULE=split_cluster --set SPLITK=2 > $L/probe_128cols_s2.txt 2>&1
timeout 60 $P --records 4096x128x4096 --set SCHEDULE=split_cluster --set SPLITK=4 > $L/probe_128cols_s4.txt 2>&1
timeout 60 $P --records 64x4096x4096 --set SCHEDULE=split_cluster --set SPLITK=4 > $L/probe_64rows_s4.txt 2>&1
timeout 60 $P --records 64x4096x4096 --set SCHEDULE=split_cluster --set SPLITK=8 > $L/probe_64rows_s8.txt 2>&1
cat $L/probe_*.txt | grep -vE "^\[" | head -60
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
timeout 200 python3 -m autotune search --sizes 128x4096x4096,4096x128x4096,64x4096x4096 --family warptile --config benchmarks/spaces/warptile_split_cluster.yaml --timeout 45 --seed 13 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9]+ +[0-9]|took|wrote|cuBLAS [0-9]"
mkdir -p $L/records; for s in 128x4096x4096 4096x128x4096 64x4096x4096; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
