"""The families' order in a search of several and their shares of a timeout (plans.by_standing,
plans.Shares), with a replay evaluator on a clock that only measurements move: what each family
gets depends on the design, never on this machine's speed."""

import random
import re
import time
import types

import pytest

from autotune.core.types import Problem
from autotune.kernels.space import Space
from autotune.search import driver, trials
from autotune.search.driver import plan_search, search, search_family
from autotune.search.plans import Shares, by_standing, make_plan, order_line
from autotune.search.replay import ReplayEvaluator
from autotune.search.storage import default_storage

HIGH = Problem(512, 512, 512, precision="high")
# As the command line hands them over: by name.
HIGH_FAMILIES = ("coarse1d", "mma_tf32", "wgmma_tf32")
FAST_S, SLOW_S = 0.5, 10.0  # what a measurement costs on the clock below


def _plans(families, problem, h100, priors=None):
    spaces = [Space.load(f) for f in families]
    spaces = [sp.with_priors(priors[sp.family.name]) if sp.family.name in (priors or {}) else sp for sp in spaces]
    return [make_plan(sp, problem, h100, gpu_slug="t", storage="sqlite:///unused.db") for sp in spaces], spaces


def _prior(space, problem, h100):
    """A valid config of the space that is not one of its seeds: a config another GPU recorded."""
    plan = make_plan(space, problem, h100, gpu_slug="t", storage="sqlite:///unused.db")
    return next(c for c in reversed(plan.valid) if c not in plan.space.seeds)


def _table(plans):
    rng = random.Random(0)
    return {c.name: rng.uniform(1000, 20000) for p in plans for c in p.valid}


class Clock:
    """A monotonic clock that only measurements move: the search's deadlines read it."""

    def __init__(self):
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    fake = types.SimpleNamespace(monotonic=c.monotonic, sleep=lambda s: None)
    monkeypatch.setattr(driver, "time", fake)
    monkeypatch.setattr(trials, "time", fake)
    return c


class Timed(ReplayEvaluator):
    """A replay evaluator whose measurements cost clock time: `slow_s` for the slow family (its
    compiles or its timings), FAST_S for the others; re-times cost nothing."""

    def __init__(self, table, limits, clock, slow, slow_s=SLOW_S):
        super().__init__(table, limits)
        self.clock, self.slow, self.slow_s = clock, slow, slow_s

    def evaluate(self, configs, problem, retime=False):
        if not retime:
            self.clock.t += sum(self.slow_s if c.family == self.slow else FAST_S for c in configs)
        return super().evaluate(configs, problem, retime)


def _measured(ev, family):
    return [n for n in ev.calls if n.startswith(family + "_")]


# ---- the order ---------------------------------------------------------------------------------


def test_the_tier_s_and_the_gpu_s_own_families_come_first_then_the_cost_model_then_the_name(h100):
    plans, _ = _plans(("coarse1d", "coarse2d", "mma_tf32", "tiled", "vectorized", "wgmma_tf32"), HIGH, h100)
    ranked = by_standing(plans, h100)
    names = [s.family for _, s in ranked]
    # wgmma_tf32 computes at the tier and is built for this GPU's architecture; mma_tf32 computes
    # at the tier; the FP32 families follow by the cost model's best estimate, tiled (no model) last.
    assert names[:2] == ["wgmma_tf32", "mma_tf32"] and names[-1] == "tiled"
    assert [s.meant_for for _, s in ranked[:2]] == [("high", "sm_90a"), ("high",)]
    # Here the model ranks the three alike (their best tiles fill the GPU alike): then by name.
    assert names[2:5] == ["coarse1d", "coarse2d", "vectorized"]
    estimates = [s.estimate for _, s in ranked[2:5]]
    assert all(estimates) and estimates == sorted(estimates, reverse=True) and ranked[-1][1].estimate is None
    # One order whatever order the families come in.
    assert [s.family for _, s in by_standing(list(reversed(plans)), h100)] == names


def test_the_cost_model_puts_the_family_it_predicts_faster_first(h100):
    big = Problem(4096, 4096, 4096)
    plans, _ = _plans(("coarse1d", "coarse2d"), big, h100)
    ranked = by_standing(plans, h100)
    assert [s.family for _, s in ranked] == ["coarse2d", "coarse1d"]
    assert ranked[0][1].estimate > ranked[1][1].estimate


def test_priors_come_before_everything_else(h100):
    prior = _prior(Space.load("vectorized"), HIGH, h100)
    plans, _ = _plans(("coarse1d", "mma_tf32", "vectorized", "wgmma_tf32"), HIGH, h100, {"vectorized": [prior]})
    ranked = by_standing(plans, h100)
    assert [s.family for _, s in ranked] == ["vectorized", "wgmma_tf32", "mma_tf32", "coarse1d"]
    assert ranked[0][1].priors == 1 and ranked[0][1].likely and not ranked[-1][1].likely
    assert [s.weight for _, s in ranked] == [2, 2, 2, 1]
    line = order_line([s for _, s in ranked], Shares([s.weight for _, s in ranked], 70))
    assert line == (
        "families, likeliest first: vectorized (1 prior) 20s, wgmma_tf32 (for high, sm_90a) 20s, "
        "mma_tf32 (for high) 20s, coarse1d 10s"
    )


def test_a_prior_that_is_a_seed_counts_as_a_prior(h100):
    space = Space.load("vectorized")
    seed = space.seeds[0]
    (plan,), _ = _plans(("vectorized",), Problem(1024, 1024, 1024), h100, {"vectorized": [seed]})
    assert plan.space.priors == [] and plan.priors_here == 1
    assert by_standing([plan], h100)[0][1].priors == 1


# ---- the shares --------------------------------------------------------------------------------


def test_a_share_is_fixed_at_the_start_and_an_overrun_falls_on_the_last():
    shares = Shares([2, 2, 1, 1], 60)
    assert [shares.fixed(i) for i in range(4)] == [20, 20, 10, 10]
    assert shares.share(0, 60) == 20
    # The first took 30 s: the second still gets its 20, the last two what is left.
    assert shares.share(1, 30) == 20 and shares.share(2, 10) == 10 and shares.share(3, 0) == 0
    # The first took 5 s: the time it left is shared out by weight over the rest.
    assert shares.share(1, 55) == 55 * 2 / 4
    # Never past the timeout.
    assert shares.share(1, 3) == 3 and shares.share(2, -4) == 0


# ---- timed searches ----------------------------------------------------------------------------


@pytest.mark.slow  # searches against a clock: 20 s on two cores (CI's slow step)
def test_a_slow_first_family_by_name_leaves_the_family_with_priors_its_trials(tmp_path, h100, clock):
    """The search that recorded a SIMT kernel at 0.75x cuBLAS: coarse1d, first by name, slow to
    compile and time, took the whole timeout; wgmma_tf32, with priors, got none of it."""
    wgmma = Space.load("wgmma_tf32")
    prior = _prior(wgmma, HIGH, h100)
    plans, spaces = _plans(HIGH_FAMILIES, HIGH, h100, {"wgmma_tf32": [prior]})
    ev = Timed(_table(plans), h100, clock, slow="coarse1d")
    kw = dict(gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=1000, batch=4, retime_top=1)
    prefetched = []
    ev.prefetch = lambda configs, problem: prefetched.append([c.name for c in configs])
    planned = plan_search(spaces, HIGH, ev, **{k: v for k, v in kw.items() if k != "retime_top"})
    first = planned[0][0]
    # Planned ahead (while cuBLAS is timed): the likeliest family, its first window compiling.
    assert first.space.family.name == "wgmma_tf32" and len(prefetched) == 1
    assert prefetched[0] and set(prefetched[0]) <= {c.name for c in first.valid}
    out = search(spaces, HIGH, ev, timeout_s=30, planned=planned, **kw)
    assert [r.family for r in out] == ["wgmma_tf32", "mma_tf32", "coarse1d"]
    got = {r.family: r for r in out}
    # Fixed shares of 12, 12 and 6 s; a trial costs 0.5 s, so about 24 each for the first two.
    assert got["wgmma_tf32"].evaluated >= 20 and prior.name in _measured(ev, "wgmma_tf32")
    assert got["mma_tf32"].evaluated >= 20
    assert got["wgmma_tf32"].best is not None
    # The slow one last, with what was left (3 s: its first window, TPE's start-up of 10, is
    # measured); the plan made ahead is the one searched first.
    assert got["wgmma_tf32"].study_name == first.name and 1 <= got["coarse1d"].evaluated <= 10


@pytest.mark.slow  # searches against a clock: 15 s on two cores (CI's slow step)
def test_an_overrun_of_the_likeliest_family_is_taken_from_the_last(tmp_path, h100, clock):
    wgmma = Space.load("wgmma_tf32")
    plans, spaces = _plans(HIGH_FAMILIES, HIGH, h100, {"wgmma_tf32": [_prior(wgmma, HIGH, h100)]})
    ev = Timed(_table(plans), h100, clock, slow="wgmma_tf32", slow_s=1.9)
    out = search(spaces, HIGH, ev, timeout_s=40, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=1000,
                 batch=2, retime_top=1)  # fmt: skip
    got = {r.family: r for r in out}
    assert [r.family for r in out] == ["wgmma_tf32", "mma_tf32", "coarse1d"]
    # Fixed shares of 16, 16 and 8 s. wgmma_tf32's first window (TPE's start-up of 10) takes 19 s:
    # 3 s over. mma_tf32 still gets its 16 s, 32 trials of 0.5 s (the 21 s left shared out in turn
    # would have given it 10.5 s, by weight 14); coarse1d the 4.5 s left, less than its 8.
    assert got["wgmma_tf32"].evaluated == 10
    assert got["mma_tf32"].evaluated >= 32
    assert 1 <= got["coarse1d"].evaluated <= 10
    assert clock.t <= 40 + 10 * FAST_S  # past the timeout by the last family's first window at most


@pytest.mark.slow  # several searches: 15 s on two cores (CI's slow step)
def test_without_a_timeout_each_family_measures_what_it_measures_alone(tmp_path, h100):
    plans, spaces = _plans(HIGH_FAMILIES, HIGH, h100)
    table = _table(plans)
    ev = ReplayEvaluator(table, h100)
    kw = dict(gpu_slug="t", trials=6, batch=2)
    out = search(spaces, HIGH, ev, storage=default_storage(tmp_path / "together", "t"), **kw)
    assert sorted(r.family for r in out) == sorted(HIGH_FAMILIES)
    for sp in spaces:
        alone = ReplayEvaluator(table, h100)
        r = search_family(sp, HIGH, alone, storage=default_storage(tmp_path / sp.family.name, "t"), **kw)
        (together,) = [x for x in out if x.family == sp.family.name]
        assert together.evaluated == r.evaluated == 6
        assert sorted(_measured(ev, sp.family.name)) == sorted(alone.calls)
        assert together.best.config == r.best.config


# ---- the command line ----------------------------------------------------------------------------

# A valid vectorized point that is not one of its seeds (as in test_priors).
PRIOR = {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}


def _cli_search(tmp_path, h100, *extra):
    """`search` of coarse1d and vectorized at 512^3 from a replay table, vectorized with a prior
    another GPU's record gives it; returns the finished command and the families' trials."""
    import json

    import optuna
    from helpers import GPU, record_entry, run_cli

    from autotune.records.store import update_record

    problem = Problem(512, 512, 512)
    plans, _ = _plans(("coarse1d", "vectorized"), problem, h100)
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"table": _table(plans), "cublas_gflops": 20000}))
    other = tmp_path / "other"
    update_record(
        other, GPU, Problem(1000, 1000, 1000), {"vectorized": record_entry("vectorized", PRIOR, 9000.0, h100)}
    )
    results = tmp_path / "r"
    r = run_cli("search", "--size", "512", "--family", "coarse1d", "vectorized", "--replay", str(table),
                "--results", str(results), "--priors", str(other / GPU["slug"]), "--yes", *extra)  # fmt: skip
    assert r.returncode == 0, (r.stdout, r.stderr)
    url = f"sqlite:///{results}/{GPU['slug']}/optuna.db"
    trials_of = {}
    for name in optuna.get_all_study_names(url):
        study = optuna.load_study(study_name=name, storage=url)
        trials_of[name.split("/")[2]] = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("evaluated")]
    return r, trials_of


def _in_order(first, then) -> bool:
    """Whether each process measured all its trials of `first` before any of `then`."""
    for pid in {t.user_attrs["timing"]["pid"] for t in first + then}:
        done = [t.datetime_complete for t in first if t.user_attrs["timing"]["pid"] == pid]
        begun = [t.datetime_start for t in then if t.user_attrs["timing"]["pid"] == pid]
        if done and begun and max(done) > min(begun):
            return False
    return True


def test_the_command_says_its_order_and_searches_the_family_with_priors_first(tmp_path, h100):
    r, got = _cli_search(tmp_path, h100, "--trials", "4", "--timeout", "600")
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("families, likeliest first:")]
    assert re.fullmatch(r"families, likeliest first: vectorized \(1 prior\) \d+s, coarse1d \d+s", line), line
    assert len(got["vectorized"]) == len(got["coarse1d"]) == 4
    assert _in_order(got["vectorized"], got["coarse1d"]) and not _in_order(got["coarse1d"], got["vectorized"])


def test_a_search_process_takes_the_families_in_the_order_the_parent_set(tmp_path, h100):
    """The processes start before the parent has ranked its plans: they read its order (and the
    weights of the shares) from shared numbers once the plans are queued."""
    import json
    import threading

    from autotune.search.parallel import _search_process, portable
    from autotune.search.plans import queue_plan

    problem = Problem(512, 512, 512)
    plans, spaces = _plans(("coarse1d", "vectorized"), problem, h100)
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"table": _table(plans)}))
    kw = dict(gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=3, sampler="tpe", seed=0, window=2)
    for sp in spaces:
        queue_plan(make_plan(sp, problem, h100, **kw))
    queued = threading.Event()
    queued.set()
    spec = {"kind": "replay", "path": str(table), "arch": None}
    families = [portable(sp) for sp in spaces]
    _search_process(0, spec, families, problem, kw, queued, time.time() + 600, 2, [1, 0, 2.0, 1.0])
    studies = {sp.family.name: make_plan(sp, problem, h100, **kw).open() for sp in spaces}
    got = {f: [t for t in st.get_trials() if t.user_attrs.get("evaluated")] for f, st in studies.items()}
    assert len(got["vectorized"]) == len(got["coarse1d"]) == 3
    assert _in_order(got["vectorized"], got["coarse1d"]) and not _in_order(got["coarse1d"], got["vectorized"])


@pytest.mark.slow  # two search processes (about 10 s on 2 cores)
def test_search_processes_take_the_families_in_the_parent_s_order(tmp_path, h100):
    r, got = _cli_search(tmp_path, h100, "--trials", "6", "--timeout", "600", "--workers", "2")
    assert "families, likeliest first: vectorized (1 prior)" in r.stderr
    assert len(got["vectorized"]) == len(got["coarse1d"]) == 6
    assert _in_order(got["vectorized"], got["coarse1d"])  # in each process
