"""How a search's wall time scales with workers (GPUs): a simulation fed with measured costs.

    # 1. the trial loop's own cost per trial on a storage (no GPU: a replay evaluator that
    #    answers at once), and the database server's CPU per trial where the server is local
    python benchmarks/scaling.py measure --storage postgresql://postgres@127.0.0.1:55433/sim \\
        --trials 128 --out storage_pg.json
    # 2. the projection: W workers share one study of TRIALS trials; the H100 runs' logs are
    #    in git history (benchmarks/logs/INDEX.md, runs 142-143)
    git archive ad66bfa benchmarks/logs/run142-h100 benchmarks/logs/run143-h100 | tar -x -C /tmp
    python benchmarks/scaling.py simulate --storage-costs storage_pg.json \\
        --gpu-runs /tmp/benchmarks/logs/run142-h100 /tmp/benchmarks/logs/run143-h100 --trials 128 \\
        --workers 1,2,4,8,16,32,64
    # 3. a real search's study, afterwards: each worker's evaluations (compile wait and GPU),
    #    host seconds (asks and tells) and the rest, from the trials' `timing`
    python benchmarks/scaling.py timeline sqlite:///results/<gpu>/optuna.db

What a worker does is `autotune search --workers W` as parallel.py runs it: the worker processes
start (imports, their GPU workers, their plans: the enumeration) while the parent enumerates the
space and queues the plan; then each asks, compiles and measures with 8 trials in flight: a
trial's compile on one of the worker's CPU cores (16 a GPU on the lent hosts), its run on the
worker's GPU, Optuna's ask and tell on the worker's main thread and the database server.
The costs are drawn from measurements, not assumed:

- a compile's and a GPU call's seconds: every one of autotune's warptile searches in
  vs_kernel_tuner.py runs (its `each` lists, H100, 16 cores; the script is in git at e8529ef);
- the start-up phases: runs' `startup.txt` (H100 host);
- the trial loop's host seconds per trial and the database server's CPU seconds per trial,
  each as a function of the trials already in the study: `measure` on this machine.

The simulation is event by event: each worker's main thread, compile cores and GPU are
resources; the database server is one more, with `--db-cores` cores, shared by all workers.
It prints each W's wall time, speed-up over one worker, and where the time went (start-up,
GPU busy share, compile cores' busy share, database busy share), and names what binds.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WINDOW = 8  # trials in flight per worker (TrialLoop's batch)
FINAL_S = 3.5  # the final re-time of the top 3 on one GPU, cuBLAS included (not measured apart)


# ---- measure: the trial loop's own costs on a storage ----------------------------------------


def _server_cpu_s() -> float:
    """CPU seconds used so far by this machine's postgres processes (0 where there are none)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name.startswith("postgres"):
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


class ModelLandscape(Mapping):
    """A replay table over the whole valid space: the cost model's estimate as GFLOP/s, so that
    TPE sees a landscape shaped like a real one (its costs do not depend on the values)."""

    def __init__(self, plan, limits):
        from autotune.search import cost

        self.by_name, self.plan, self.limits, self.cost = plan.valid_by_name, plan, limits, cost

    def __getitem__(self, name):
        cfg = self.by_name[name]
        fam = self.plan.space.family
        return 60_000 * self.cost.estimate(fam, fam.derive(cfg.as_dict()), self.plan.problem, self.limits) + 1.0

    def __iter__(self):
        return iter(self.by_name)

    def __len__(self):
        return len(self.by_name)


def measure(args) -> None:
    from autotune.core.types import Problem
    from autotune.kernels.limits import load_profile
    from autotune.kernels.space import Space
    from autotune.search.plans import make_plan, queue_plan
    from autotune.search.replay import ReplayEvaluator
    from autotune.search.trials import run_trials

    limits = load_profile("h100")
    problem = Problem(args.size, args.size, args.size)
    storage = args.storage or f"sqlite:///{tempfile.mkdtemp()}/optuna.db"
    t0 = time.perf_counter()
    plan = make_plan(
        Space.load(args.family).without_seeds(),
        problem,
        limits,
        gpu_slug="scaling-sim",
        storage=storage,
        trials=args.trials,
        seed=args.seed,
    )
    plan_s = time.perf_counter() - t0
    queue_plan(plan)
    ev = ReplayEvaluator(ModelLandscape(plan, limits), limits)
    stamps, server = [], []

    def on_trial(_m):
        stamps.append(time.perf_counter())
        server.append(_server_cpu_s())

    start, server0 = time.perf_counter(), _server_cpu_s()
    run_trials(plan, ev, on_trial=on_trial, shared=True, recover=False)  # as each of --workers W runs
    host = [b - a for a, b in zip([start, *stamps], stamps, strict=False)]
    db = [b - a for a, b in zip([server0, *server], server, strict=False)]
    out = {
        "storage": re.sub(r"//[^@/]*@", "//", storage),
        "family": args.family,
        "problem": problem.name,
        "trials": len(stamps),
        "plan_s_here": plan_s,
        "host_s_per_trial": host,
        "server_cpu_s_per_trial": db,
        "cpu": os.cpu_count(),
    }
    Path(args.out).write_text(json.dumps(out, indent=1))
    q = len(host) // 4
    for i in range(4):
        part = slice(i * q, (i + 1) * q)
        print(
            f"trials {i * q + 1:4d}-{(i + 1) * q:4d}: host {statistics.mean(host[part]) * 1e3:6.1f} ms/trial, "
            f"server CPU {statistics.mean(db[part]) * 1e3:6.1f} ms/trial"
        )


# ---- simulate -----------------------------------------------------------------------------


def _per_n(values: list[float], n: int) -> float:
    """The measured cost at study size n: the mean over a window around n (the last for n past
    the measurement), since one trial's time is noisy."""
    i = min(n, len(values) - 1)
    window = values[max(0, i - 4) : i + 5]
    return statistics.mean(window)


def load_gpu_inputs(folders: list[Path], startup_from: list[Path] | None = None) -> dict:
    """Compile and GPU-call seconds from the folders' vs_kernel_tuner.py JSON; start-up phases
    from their startup.txt, or only from `startup_from`'s (a later code's start-up)."""
    compile_s, gpu_s, startup = [], [], []
    for folder in dict.fromkeys([*folders, *(startup_from or [])]):
        for path in folder.glob("*.json"):
            doc = json.loads(path.read_text())
            for run in doc.get("runs", []):
                if run.get("tool") == "autotune" and "each" in run:
                    compile_s += run["each"]["compile_s"]
                    gpu_s += run["each"]["gpu_call_s"]
        st = folder / "startup.txt"
        if st.is_file() and (not startup_from or folder in startup_from):
            for line in st.read_text().splitlines():
                got = dict(re.findall(r"(\w+_s) ([\d.]+)", line))
                if {"import_s", "evaluator_s", "cublas_s", "plan_s", "queue_s"} <= got.keys():
                    startup.append({k: float(v) for k, v in got.items()})
    if not (compile_s and gpu_s and startup):
        raise SystemExit("--gpu-runs: need vs_kernel_tuner.py JSON with autotune runs and a startup.txt")
    return {"compile_s": compile_s, "gpu_call_s": gpu_s, "startup": startup}


def simulate_one(
    workers: int,
    trials: int,
    inputs: dict,
    storage: dict,
    cores: int,
    db_cores: int,
    seed: int,
) -> dict:
    """One search of `trials` trials over `workers` workers; times in seconds from the command's start."""
    rng = random.Random(seed)
    phase = {k: statistics.mean(s[k] for s in inputs["startup"]) for k in inputs["startup"][0]}
    # The command: imports, its GPU worker, cuBLAS's time, then the plan (enumeration and the
    # model's start-up) and its queue. With several workers the processes are spawned before
    # the plan and start meanwhile: imports, their own GPU worker and plan (the enumeration, no
    # model start-up to rank); they ask once the parent has queued. (Logs from before that
    # worker plan was measured apart give the whole plan for it.)
    parent = phase["import_s"] + phase["evaluator_s"] + phase.get("cublas_s", 0.0)
    t_first = parent + phase["plan_s"] + phase["queue_s"]
    if workers > 1:
        worker = phase["import_s"] + phase["evaluator_s"] + phase.get("worker_plan_s", phase["plan_s"])
        t_first = parent + max(phase["plan_s"] + phase["queue_s"], worker)
    host, server = storage["host_s_per_trial"], storage["server_cpu_s_per_trial"]
    db_free = [0.0] * db_cores
    busy = {"gpu": 0.0, "compile": 0.0, "db": 0.0}
    asked = 0
    # Each worker: (main thread's clock, worker index); its compile cores, GPU clock, pending trials.
    state = [{"cores": [t_first] * cores, "gpu": t_first, "pending": []} for _ in range(workers)]
    heap = [(t_first + 1e-6 * w, w) for w in range(workers)]
    finished = t_first
    while heap:
        now, w = heapq.heappop(heap)
        s = state[w]
        if asked < trials and len(s["pending"]) < WINDOW:
            # ask: the host's share and a request to the database server (FIFO over its cores)
            n = asked
            asked += 1
            h, d = _per_n(host, n), _per_n(server, n)
            i = min(range(db_cores), key=db_free.__getitem__)
            start = max(now + h / 2, db_free[i])
            db_free[i] = start + d
            busy["db"] += d
            now = db_free[i]
            c = rng.choice(inputs["compile_s"])
            j = min(range(cores), key=s["cores"].__getitem__)
            done = max(now, s["cores"][j]) + c
            s["cores"][j] = done
            busy["compile"] += c
            s["pending"].append(done)
            heapq.heappush(heap, (now, w))
        elif s["pending"]:
            # evaluate the first compiled trial on the GPU, then tell
            s["pending"].sort()
            ready = s["pending"].pop(0)
            g = rng.choice(inputs["gpu_call_s"])
            begin = max(now, ready, s["gpu"])
            s["gpu"] = begin + g
            busy["gpu"] += g
            now = s["gpu"] + _per_n(host, asked) / 2
            finished = max(finished, now)
            heapq.heappush(heap, (now, w))
    wall = finished + FINAL_S
    span = max(1e-9, finished - t_first)
    return {
        "workers": workers,
        "wall_s": wall,
        "start_up_s": t_first,
        "gpu_busy": busy["gpu"] / (workers * span),
        "compile_busy": busy["compile"] / (workers * cores * span),
        "db_busy": busy["db"] / (db_cores * span),
        "trials_per_worker": trials / workers,
    }


def simulate(args) -> None:
    inputs = load_gpu_inputs(args.gpu_runs, args.startup_from)
    storage = json.loads(Path(args.storage_costs).read_text())
    rows = []
    for w in [int(x) for x in args.workers.split(",")]:
        runs = [simulate_one(w, args.trials, inputs, storage, args.cores, args.db_cores, s) for s in range(5)]
        row = {k: statistics.mean(r[k] for r in runs) for k in runs[0]}
        rows.append(row)
    base = rows[0]["wall_s"] * rows[0]["workers"] if rows[0]["workers"] == 1 else None
    print(
        f"{args.trials} trials; start-up before the first trial {rows[0]['start_up_s']:.1f} s; "
        f"{len(inputs['compile_s'])} compiles (median {statistics.median(inputs['compile_s']):.2f} s), "
        f"{len(inputs['gpu_call_s'])} GPU calls (median {statistics.median(inputs['gpu_call_s']):.3f} s); "
        f"storage {storage['storage']} ({storage['trials']} trials measured)\n"
    )
    print(
        "| workers | trials a worker | wall s | speed-up | start-up share | GPU busy | compile cores busy | DB busy |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        speed = f"{base / r['wall_s']:.2f}x" if base else "-"
        print(
            f"| {r['workers']:.0f} | {r['trials_per_worker']:.0f} | {r['wall_s']:.1f} | {speed} | "
            f"{r['start_up_s'] / r['wall_s']:.0%} | {r['gpu_busy']:.0%} | {r['compile_busy']:.0%} | "
            f"{r['db_busy']:.0%} |"
        )
    last = rows[-1]
    shares = {
        "the start-up (imports, GPU workers, the plans)": last["start_up_s"] / last["wall_s"],
        "the database server": last["db_busy"],
        "the compile cores": last["compile_busy"],
        "the GPUs": last["gpu_busy"],
    }
    name = max(shares, key=shares.get)
    print(f"\nAt {last['workers']:.0f} workers the binding cost is {name}: {shares[name]:.0%} (of wall time or busy).")
    if args.out:
        Path(args.out).write_text(
            json.dumps({"rows": rows, "bottleneck": name, "args": vars(args)}, indent=1, default=str)
        )


# ---- timeline: where each worker of a real search spent its time -------------------------------


def timeline(storage: str) -> list[dict]:
    """Per study and worker of a search's storage: the measured trials' `timing` (trials.py) summed,
    and the rest of the worker's span (waiting for the others' start-up, or idle)."""
    import optuna

    out = []
    for name in optuna.get_all_study_names(storage):
        trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
        by_worker: dict[str, list[dict]] = {}
        for t in trials:
            if t.user_attrs.get("evaluated") and "timing" in t.user_attrs:
                timing = t.user_attrs["timing"]  # at_s counts from its own process's loop start
                key = f"{t.user_attrs.get('worker', '?')} pid {timing.get('pid', '?')}"
                by_worker.setdefault(key, []).append(timing)
        for worker, ts in sorted(by_worker.items()):
            span = max(x["at_s"] + x["evaluate_s"] for x in ts) - min(x["at_s"] for x in ts)
            evaluate, host = sum(x["evaluate_s"] for x in ts), sum(x["host_s"] for x in ts)
            out.append(
                {
                    "study": name,
                    "worker": worker,
                    "trials": len(ts),
                    "span_s": span,
                    "evaluate_s": evaluate,
                    "host_s": host,
                    "rest_s": max(0.0, span - evaluate - host),
                }
            )
    return out


def print_timeline(args) -> None:
    print("| study | worker | trials | first to last evaluation s | evaluations s | host s | rest s |")
    print("|---|---|---|---|---|---|---|")
    for url in args.storage:
        for r in timeline(url):
            print(
                f"| {r['study']} | {r['worker']} | {r['trials']} | {r['span_s']:.1f} | {r['evaluate_s']:.1f} | "
                f"{r['host_s']:.1f} | {r['rest_s']:.1f} |"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="the trial loop's cost per trial on a storage (no GPU)")
    m.add_argument("--storage", help="an Optuna storage URL (default: a fresh SQLite file)")
    m.add_argument("--family", default="warptile")
    m.add_argument("--size", type=int, default=4096)
    m.add_argument("--trials", type=int, default=128)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", required=True)
    s = sub.add_parser("simulate", help="project wall time over worker counts")
    s.add_argument("--storage-costs", required=True, help="a `measure` output")
    s.add_argument("--gpu-runs", type=Path, nargs="+", required=True, help="device log folders (see the docstring)")
    s.add_argument(
        "--startup-from", type=Path, nargs="+", help="take the start-up phases from these folders' startup.txt only"
    )
    s.add_argument("--trials", type=int, default=128)
    s.add_argument("--workers", default="1,2,4,8,16,32,64")
    s.add_argument("--cores", type=int, default=16, help="CPU cores a worker (GPU) has for compiles")
    s.add_argument("--db-cores", type=int, default=4, help="cores of the database server")
    s.add_argument("--out")
    t = sub.add_parser("timeline", help="where each worker of a search spent its time, from its study")
    t.add_argument("storage", nargs="+", help="Optuna storage URLs (sqlite:///results/<gpu>/optuna.db)")
    args = ap.parse_args()
    {"measure": measure, "simulate": simulate, "timeline": print_timeline}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
