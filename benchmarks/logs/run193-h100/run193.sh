# Issue 16: A_ROWS's 16-byte copies of A with an L2 prefetch of 256 bytes (cp.async ... .L2::256B,
# l2.patch): A's rows are read 128 bytes a row a k-tile, and the same kernel reads A 7% faster when
# A is stored K x M (runs 187-188). Prediction: 4096x32x4096 from 36.6-37.0 us to about 35.5 us, 8
# and 16 columns about 2% faster. (1) the three A_ROWS records, 5 rounds each against cuBLAS, on
# the code as committed, then with l2.patch applied; (2) with the patch, warptile searched at the
# three shapes (A_ROWS space, 60 s, seed 2; the records' configs are among its seeds, so they are
# measured again with the patched code) into a copy of results/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUPY_TF32=0 AUTOTUNE_CACHE=/tmp/cache193
L=$OUT/logs/run193-h100; mkdir -p $L
cp run193.sh l2.patch $L/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt
echo "code $COMMIT; nproc $(nproc)" >> $L/gpu.txt
S=4096x8x4096,4096x16x4096,4096x32x4096
timeout 60 python3 benchmarks/probe.py --records $S --repeat 5 > $L/probe_before.txt 2>&1
patch -p1 < l2.patch > $L/patch.txt 2>&1
timeout 60 python3 benchmarks/probe.py --records $S --repeat 5 > $L/probe_after.txt 2>&1
grep -vE "^\[" $L/probe_before.txt $L/probe_after.txt | grep -E "rounds|record"
cp -r results /tmp/resc; rm -f /tmp/resc/*/optuna.db
timeout 330 python3 -m autotune search --sizes $S --family warptile --config benchmarks/spaces/warptile_a_rows.yaml \
    --timeout 60 --seed 2 --results /tmp/resc > $L/search.txt 2>&1
grep -vE "^\[" $L/search.txt | grep -E "^[a-z0-9_]+ +[0-9]|took|wrote|cuBLAS [0-9]|x cuBLAS"
mkdir -p $L/records; for s in ${S//,/ }; do cp /tmp/resc/nvidia-h100-80gb-hbm3/$s.json $L/records/; done
tar czf $OUT/logs.tar.gz -C $OUT logs
