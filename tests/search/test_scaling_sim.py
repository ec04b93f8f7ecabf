"""benchmarks/scaling.py's simulation: the costs it is given add up as a search spends them."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import scaling  # noqa: E402 - after the sys.path line that finds benchmarks/

STARTUP = {"import_s": 1.0, "evaluator_s": 1.0, "cublas_s": 1.0, "plan_s": 10.0, "queue_s": 1.0}
FREE_STORAGE = {"host_s_per_trial": [0.0], "server_cpu_s_per_trial": [0.0]}


def run(workers, trials=128, compile_s=1.0, gpu_s=0.1, storage=FREE_STORAGE, cores=16, startup=STARTUP):
    inputs = {"compile_s": [compile_s], "gpu_call_s": [gpu_s], "startup": [startup]}
    return scaling.simulate_one(workers, trials, inputs, storage, cores, 4, 0)


def test_one_worker_is_start_up_then_a_compile_bound_pipeline():
    r = run(1)
    assert r["start_up_s"] == 14.0  # imports, GPU worker, cuBLAS, plan, queue: once
    # 8 trials in flight; a new one is asked once the GPU has run the last (as TrialLoop does),
    # so each slot turns over in a compile plus a run: 1.1 s for 8 trials.
    body = r["wall_s"] - r["start_up_s"] - scaling.FINAL_S
    assert 128 * 1.1 / 8 <= body <= 128 * 1.1 / 8 + 1.2
    assert 0.5 < r["gpu_busy"] < 0.8


def test_workers_start_while_the_parent_plans_and_the_slower_of_the_two_binds():
    # parent: 3 s, then plan + queue 11 s; a worker: imports, GPU worker, its plan (the whole
    # plan where a log has no worker plan of its own): 12 s, so it is the one waited for.
    assert run(2)["start_up_s"] == 3.0 + 12.0
    assert run(2, startup=dict(STARTUP, worker_plan_s=4.0))["start_up_s"] == 3.0 + 11.0


def test_more_workers_never_slower_when_trials_abound_and_the_floor_is_the_start_up():
    walls = [run(w, trials=1024)["wall_s"] for w in (1, 2, 4, 8, 16)]
    assert all(a > b for a, b in zip(walls, walls[1:], strict=False))
    few = run(64, trials=128)
    assert few["wall_s"] < few["start_up_s"] + scaling.FINAL_S + 3  # two trials a worker: one round


def test_a_slow_database_binds():
    slow = {"host_s_per_trial": [0.0], "server_cpu_s_per_trial": [0.2]}
    r = run(16, trials=256, storage=slow)
    # 256 requests of 0.2 s on 4 server cores: at least 12.8 s, whatever the workers do.
    assert r["wall_s"] - r["start_up_s"] - scaling.FINAL_S >= 256 * 0.2 / 4
    assert r["db_busy"] > 0.9


def test_timeline_sums_each_workers_trials_from_the_study(tmp_path, h100):
    """`scaling.py timeline` reads a real search's study: per worker (process), its measured
    trials, the evaluations' seconds (here the replay's delay) and the host's."""
    import random

    from autotune.core.types import Problem
    from autotune.kernels.space import Space
    from autotune.search.driver import search_family
    from autotune.search.replay import ReplayEvaluator
    from autotune.search.storage import default_storage

    sp = Space.load("coarse2d")
    valid = sp.enumerate(h100).valid
    rng = random.Random(0)
    table = {c.name: rng.uniform(1000, 20000) for c in valid}
    url = default_storage(tmp_path, "t")
    ev = ReplayEvaluator(table, h100, delay_s=0.02)
    search_family(sp, Problem(512, 512, 512), ev, gpu_slug="t", storage=url, trials=8, sampler="random", retime_top=0)
    (row,) = scaling.timeline(url)
    assert row["trials"] == 8 and 8 * 0.02 <= row["evaluate_s"] <= row["span_s"] + 1e-6
    assert row["host_s"] >= 0 and row["worker"].endswith(f"pid {__import__('os').getpid()}")
