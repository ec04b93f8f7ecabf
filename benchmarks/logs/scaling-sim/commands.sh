# CPU only (this machine: 2 cores), PostgreSQL 15 on loopback started for the measurement:
#   initdb -D /tmp/pgsim -A trust -U postgres; pg_ctl -D /tmp/pgsim -o "-c listen_addresses=127.0.0.1 -p 55433" start
python benchmarks/scaling.py measure --storage postgresql+psycopg://postgres@127.0.0.1:55433/sim --trials 128 --out storage_pg.json
python benchmarks/scaling.py measure --trials 128 --out storage_sqlite.json
G="--gpu-runs benchmarks/logs/run142-h100 benchmarks/logs/run143-h100"
python benchmarks/scaling.py simulate --storage-costs storage_pg.json $G --trials 128 --out sim_128_pg.json
python benchmarks/scaling.py simulate --storage-costs storage_pg.json $G --trials 128 --plan-once --out sim_128_pg_plan_once.json
python benchmarks/scaling.py simulate --storage-costs storage_sqlite.json $G --trials 128 --workers 1,2,4,8 --out sim_128_sqlite.json
python benchmarks/scaling.py simulate --storage-costs storage_pg.json $G --trials 1024 --out sim_1024_pg.json
python benchmarks/scaling.py simulate --storage-costs storage_pg.json $G --trials 64 --workers 1,2 --out sim_64_pg.json
