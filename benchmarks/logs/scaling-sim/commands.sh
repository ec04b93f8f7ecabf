# CPU only (this machine: 2 cores), PostgreSQL 15 on loopback started for the measurement:
#   initdb -D /tmp/pgdata -A trust -U postgres; pg_ctl -D /tmp/pgdata -o "-p 55433 -k /tmp" start
# The trial loop as each process of `search --workers W` runs it (a shared study), at 0f2be63:
python benchmarks/scaling.py measure --storage postgresql+psycopg://postgres@127.0.0.1:55433/sim --trials 128 --out storage_pg.json
python benchmarks/scaling.py measure --trials 128 --out storage_sqlite.json
# Compile and GPU-call times from runs 142-143 (H100), the start-up from run 147 (two H200s):
G="--gpu-runs benchmarks/logs/run142-h100 benchmarks/logs/run143-h100 --startup-from benchmarks/logs/run147-h200x2"
python benchmarks/scaling.py simulate --storage-costs storage_sqlite.json $G --trials 128 --workers 1,2,4,8 --out sim_128_sqlite.json
python benchmarks/scaling.py simulate --storage-costs storage_pg.json $G --trials 128 --out sim_128_pg.json
python benchmarks/scaling.py simulate --storage-costs storage_pg.json $G --trials 1024 --out sim_1024_pg.json
