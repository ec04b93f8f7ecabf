"""The Optuna loop with a replay evaluator: no GPU, real studies, real storage."""

import random

import optuna
import pytest

from autotune.core.types import Problem, Status, UserError
from autotune.kernels.space import Space
from autotune.search.driver import search, search_family
from autotune.search.replay import ReplayEvaluator
from autotune.search.storage import default_storage

P = Problem(512, 512, 512)


def _table(space, h100, seed=0):
    valid = space.enumerate(h100).valid
    rng = random.Random(seed)
    table = {c.name: rng.uniform(1000, 20000) for c in valid}
    for c in rng.sample(valid, 5):
        table[c.name] = Status.INCORRECT
    return valid, table


def _family(sp, ev, storage, **kw):
    """search_family at P for GPU "t": `storage` a URL, or a folder for the default one in it."""
    url = storage if isinstance(storage, str) else default_storage(storage, "t")
    return search_family(sp, P, ev, gpu_slug="t", storage=url, **kw)


def _trials(result, storage):
    return optuna.load_study(study_name=result.study_name, storage=storage).get_trials()


@pytest.mark.slow  # a grid search to its end (about 17 s)
def test_grid_search_finds_the_known_best_and_never_repeats(tmp_path, h100):
    sp = Space.load("coarse1d")
    sp.seeds = []
    valid, table = _table(sp, h100)
    best = max((n for n, v in table.items() if not isinstance(v, Status)), key=table.get)
    ev = ReplayEvaluator(table, h100)
    r = search_family(
        sp,
        P,
        ev,
        gpu_slug="test",
        storage=default_storage(tmp_path, "test"),
        trials=len(valid),
        sampler="grid",
        batch=16,
    )
    measured = ev.calls[: len(valid)]
    assert len(set(measured)) == len(measured) == len(valid)  # every point once
    assert set(measured) <= {c.name for c in valid}
    assert r.best.config.name == best and r.best.gflops == table[best]
    assert r.counts.get("incorrect") == 5


def test_incorrect_never_wins(tmp_path, h100):
    sp = Space.load("tiled")
    table = {c.name: Status.INCORRECT for c in sp.enumerate(h100).valid}
    ok = sp.enumerate(h100).valid[0].name
    table[ok] = 10.0
    r = _family(sp, ReplayEvaluator(table, h100), tmp_path, trials=10, sampler="random")
    assert r.best.config.name == ok


def test_tpe_starts_from_seeds_and_keeps_the_best(tmp_path, h100):
    sp = Space.load("coarse2d")
    valid, table = _table(sp, h100, 1)
    table[sp.seeds[0].name] = 99999.0
    ev = ReplayEvaluator(table, h100)
    r = _family(sp, ev, tmp_path, trials=20, seed=3)
    assert ev.calls[0] == sp.seeds[0].name
    assert r.best.config.name == sp.seeds[0].name and r.evaluated == 20
    assert set(ev.calls) <= {c.name for c in valid}  # invalid proposals never reach the evaluator


def test_resumes_the_same_study_without_repeating(tmp_path, h100):
    sp = Space.load("coarse1d")
    _, table = _table(sp, h100, 2)
    ev1 = ReplayEvaluator(table, h100)
    r1 = _family(sp, ev1, tmp_path, trials=8, retime_top=0)
    ev2 = ReplayEvaluator(table, h100)
    r2 = _family(sp, ev2, tmp_path, trials=20, retime_top=0)
    assert r1.study_name == r2.study_name and r2.evaluated == 20
    assert len(ev2.calls) == 12 and not set(ev1.calls) & set(ev2.calls)


def test_a_different_space_is_a_different_study(tmp_path, h100):
    a = Space.load("coarse1d")
    b = Space.from_dict(a.family, {"space": {**a.values, "TM": [4, 8]}}, "b.yaml")
    _, table = _table(a, h100)
    ra = _family(a, ReplayEvaluator(table, h100), tmp_path, trials=3)
    rb = _family(b, ReplayEvaluator(table, h100), tmp_path, trials=3)
    assert ra.study_name != rb.study_name


def test_a_cold_search_tries_no_seed_and_shares_no_study_with_a_seeded_one(tmp_path, h100):
    """search --no-seeds: the seeds are not queued, and a seeded study of the same space (whose
    trials start from the seeds) is not resumed by it."""
    sp = Space.load("coarse2d")
    _, table = _table(sp, h100, 1)
    warm = _family(sp, ReplayEvaluator(table, h100), tmp_path, trials=6, seed=3)
    ev = ReplayEvaluator(table, h100)
    cold = _family(sp.without_seeds(), ev, tmp_path, trials=6, seed=3)
    assert cold.study_name != warm.study_name and cold.evaluated == 6
    assert not {s.name for s in sp.seeds} & set(ev.calls[:2])  # the cost model's start-up, not the seeds
    assert sp.without_seeds().for_problem(Problem(8, 8, 8, "nt")).cold


def test_a_template_edit_is_a_different_study(tmp_path):
    """Configs measured with other template text are other code: a study must not resume them."""
    from autotune.kernels.family import TEMPLATE_DIR, Family
    from autotune.search.studies import study_name

    for name in ("coarse1d.cu.j2", "_common.cuh.j2"):
        (tmp_path / name).write_text((TEMPLATE_DIR / name).read_text())
    values = Space.load("coarse1d").values

    def name_now():
        space = Space.from_dict(Family.load("coarse1d", tmp_path), {"space": values}, "x.yaml")
        return study_name("t", P, space, "tpe")

    first = name_now()
    assert name_now() == first
    (tmp_path / "_common.cuh.j2").write_text((tmp_path / "_common.cuh.j2").read_text() + "// an included file edited\n")
    included = name_now()
    (tmp_path / "coarse1d.cu.j2").write_text((tmp_path / "coarse1d.cu.j2").read_text() + "// the template edited\n")
    assert len({first, included, name_now()}) == 3


@pytest.mark.slow  # a search stopped by its timeout, really waited for (about 8 s)
def test_timeout_stops_the_search(tmp_path, h100):
    sp = Space.load("coarse2d")
    _, table = _table(sp, h100)
    ev = ReplayEvaluator(table, h100, delay_s=0.05)
    import time

    # The clock runs from the start, enumeration of the space and the study's creation included
    # (seconds on a busy machine); 500 trials of 0.05 s would take 25 s.
    t0 = time.monotonic()
    out = search([sp], P, ev, timeout_s=5.0, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=500)
    assert time.monotonic() - t0 < 15 and 0 < out[0].evaluated < 200


def test_unreachable_storage_is_a_user_error(h100):
    sp = Space.load("tiled")
    with pytest.raises(UserError, match="storage"):
        _family(sp, ReplayEvaluator({}, h100), "sqlite:////nonexistent/dir/x.db")


def _one_step_apart(a, b, space) -> bool:
    moved = [p for p in space.values if a[p] != b[p]]
    if len(moved) != 1:
        return False
    order = sorted(space.values[moved[0]])
    return abs(order.index(a[moved[0]]) - order.index(b[moved[0]])) == 1


def test_tpe_spends_its_last_share_on_neighbours_of_the_best(tmp_path, h100):
    from autotune.search.strategies import tpe as T

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 2)
    ev = ReplayEvaluator(table, h100)
    r = _family(sp, ev, tmp_path, trials=30, seed=1, retime_top=0)
    trials = _trials(r, default_storage(tmp_path, "t"))
    local = [t for t in trials if t.user_attrs.get("local")]
    assert 0 < len(local) <= round(T.LOCAL_SHARE * 30)
    by_name = {c.name: c for c in valid}
    for t in local:  # each is one parameter one step away from a config measured before it
        cfg = by_name[t.user_attrs["config"]]
        before = [
            by_name[u.user_attrs["config"]]
            for u in trials
            if u.number < t.number and u.user_attrs.get("evaluated") and u.user_attrs["config"] in by_name
        ]
        assert any(_one_step_apart(cfg, b, sp) for b in before)
    assert len(set(ev.calls)) == len(ev.calls) == 30


class _Clock:
    """time.monotonic for the search's modules: it moves only when a candidate is measured, so
    what a search does before a deadline depends on its logic, not on this machine's speed."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_deadline_gives_its_last_share_of_time_to_neighbours(tmp_path, h100, monkeypatch):
    """More trials than the time allows (or --timeout alone): the neighbour phase comes with the
    last LOCAL_SHARE of the time, not only of the trials, which such a search never reaches.
    Each measurement takes 0.1 s of a fake clock: a 6-second deadline allows 60."""
    from autotune.search import driver, trials
    from autotune.search.storage import make_storage

    clock = _Clock()
    for module in (driver, trials):
        monkeypatch.setattr(module, "time", clock)
    sp = Space.load("coarse2d")
    sp.seeds = []
    _, table = _table(sp, h100, 2)
    ev = ReplayEvaluator(table, h100, on_evaluate=lambda cfg: clock.sleep(0.1))
    url = f"memory:{tmp_path}"  # the study in this process: quicker to read than SQLite
    deadline = clock.monotonic() + 6.0
    r = _family(sp, ev, url, trials=3000, deadline=deadline, retime_top=0)
    assert 60 <= r.evaluated < 0.6 * 3000  # the trial count never came near its own neighbour phase
    trials_ = _trials(r, make_storage(url))
    done = [t for t in trials_ if t.user_attrs.get("evaluated")]
    local = [t for t in done if t.user_attrs.get("local")]
    assert len(local) >= 10
    # They come late: none in the first half of the loop's time, and most of the last 30%.
    span = max(t.user_attrs["timing"]["at_s"] for t in done)
    assert min(t.user_attrs["timing"]["at_s"] for t in local) >= 0.5 * span
    late = [t for t in done if t.user_attrs["timing"]["at_s"] >= 0.7 * span]
    assert len([t for t in late if t.user_attrs.get("local")]) >= 0.5 * len(late)  # a window asked earlier


@pytest.mark.slow  # a grid measured whole, chunk by chunk (about 13 s)
def test_a_grid_larger_than_its_queue_chunk_is_measured_whole_once(tmp_path, h100, monkeypatch):
    """A grid's points are queued a chunk at a time (a whole large space up front took most of
    an hour of database writes); a worker whose queue runs dry queues the next."""
    from autotune.search.strategies import grid

    monkeypatch.setattr(grid, "GRID_CHUNK", 7)
    sp = Space.load("coarse1d")
    valid, table = _table(sp, h100)
    assert len(valid) > 3 * 7
    ev = ReplayEvaluator(table, h100)
    url = default_storage(tmp_path, "t")
    r = _family(sp, ev, url, trials=len(valid), sampler="grid", batch=4)
    assert sorted(ev.calls[: len(valid)]) == sorted(c.name for c in valid)  # each point once
    assert r.evaluated == len(valid)
    # A budget short of the space stops at the budget, across chunks, and a resume goes on
    # from where it stopped.
    url2 = default_storage(tmp_path / "b", "t")
    ev2 = ReplayEvaluator(table, h100)
    _family(sp, ev2, url2, trials=17, sampler="grid", batch=4, retime_top=0)
    _family(sp, ev2, url2, trials=30, sampler="grid", batch=4, retime_top=0)
    assert len(ev2.calls) == len(set(ev2.calls)) == 30


def test_a_worker_with_its_own_seed_queues_no_grid_point_past_the_budget(tmp_path, h100, monkeypatch):
    """Worker processes sample with seeds of their own (parallel.WORKER_SEED_STRIDE); the grid's
    order is the study's, so a worker whose queue runs dry finds the budget all queued (three
    workers once measured 61 points of a 60-point grid)."""
    from autotune.search import plans
    from autotune.search.parallel import WORKER_SEED_STRIDE
    from autotune.search.strategies import grid

    monkeypatch.setattr(grid, "GRID_CHUNK", 25)
    sp = Space.load("coarse1d")
    kw = dict(gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=60, sampler="grid")
    parent = plans.make_plan(sp, P, h100, seed=0, **kw)
    assert plans.queue_plan(parent) == 25
    worker = plans.make_plan(sp, P, h100, seed=WORKER_SEED_STRIDE, queued_by_parent=True, **kw)
    assert plans.queue_plan(worker) == 25 and plans.queue_plan(worker) == 10 and plans.queue_plan(worker) == 0
    planned = [t.user_attrs["config"] for t in parent.open().get_trials() if t.user_attrs.get("planned")]
    # The same 60 points as one process alone would have queued.
    alone = plans.make_plan(sp, P, h100, seed=0, **{**kw, "storage": default_storage(tmp_path / "b", "t")})
    while plans.queue_plan(alone):
        pass
    assert planned == [t.user_attrs["config"] for t in alone.open().get_trials() if t.user_attrs.get("planned")]


def test_random_search_has_no_neighbour_phase(tmp_path, h100):
    sp = Space.load("coarse2d")
    valid, table = _table(sp, h100, 2)
    r = _family(sp, ReplayEvaluator(table, h100), tmp_path, trials=30, sampler="random")
    trials = _trials(r, default_storage(tmp_path, "t"))
    assert not [t for t in trials if t.user_attrs.get("local")]


def test_tpe_asks_its_random_start_at_once_then_keeps_a_window(tmp_path, h100):
    from autotune.search.strategies import tpe as S

    class Recording(ReplayEvaluator):
        def prefetch(self, configs, problem):
            self.events.append(("prefetch", len(configs)))

        def first_ready(self, configs, problem):
            self.events.append(("ready", len(configs)))
            return 0

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 3)
    ev = Recording(table, h100)
    ev.events = []
    _family(sp, ev, tmp_path, trials=20, batch=3)
    first = ev.events.index(("ready", S.TPE_STARTUP))
    # The plan's first window (3) is handed to compile before the loop starts (plan_ahead); then
    # the start-up trials need no results: all asked, each handed to compile as it is asked,
    # before the first evaluation; then the window stays at 3 once the start-up is measured.
    assert ev.events[:first] == [("prefetch", 3)] + [("prefetch", 1)] * S.TPE_STARTUP
    assert {e for e in ev.events[1:] if e[0] == "prefetch"} == {("prefetch", 1)}
    ready = [n for kind, n in ev.events if kind == "ready"]
    assert ready[0] == S.TPE_STARTUP and ready[-8:-3] == [3] * 5


def test_plan_search_compiles_the_first_window_the_search_then_asks(tmp_path, h100):
    """plan_search (made while cuBLAS is timed) hands the evaluator the configs the first asks
    will get; the search then runs on that plan."""
    from autotune.search.driver import plan_search, search

    class Recording(ReplayEvaluator):
        def prefetch(self, configs, problem):
            self.prefetched.extend(c.name for c in configs)

    sp = Space.load("coarse2d").without_seeds()  # queued: the model's start-up
    valid, table = _table(sp, h100, 5)
    ev = Recording(table, h100)
    ev.prefetched = []
    kwargs = dict(gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=12, seed=1, batch=4)
    planned = plan_search([sp], P, ev, **kwargs)
    ((plan, _),) = planned
    ahead = list(ev.prefetched)
    assert len(ahead) == 4 and ahead == [c.name for c in plan.startup[:4]]
    (r,) = search([sp], P, ev, planned=planned, retime_top=0, **kwargs)
    assert ev.prefetched[4:8] == ahead  # the loop's first asks: the same four, compiled already
    assert r.study_name == plan.name and r.evaluated == 12


def test_the_search_runs_whichever_candidate_is_ready_first(tmp_path, h100):
    class LastReady(ReplayEvaluator):
        def first_ready(self, configs, problem):
            self.offered = getattr(self, "offered", []) + [[c.name for c in configs]]
            return len(configs) - 1

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 4)
    ev = LastReady(table, h100)
    _family(sp, ev, tmp_path, trials=12, sampler="random", batch=4, retime_top=0)
    assert [o[-1] for o in ev.offered] == ev.calls  # each evaluation is the one first_ready named
    assert ev.calls[0] != ev.offered[0][0]


def test_one_storage_per_url_until_its_file_is_gone(tmp_path):
    from autotune.search.storage import make_storage

    url = default_storage(tmp_path, "t")
    first = make_storage(url)
    assert make_storage(url) is first
    (tmp_path / "t" / "optuna.db").unlink()
    assert make_storage(url) is not first  # a deleted database is opened afresh
    assert make_storage("memory:x") is make_storage("memory:x") is not make_storage("memory:y")


def test_a_new_database_created_by_another_process_at_the_same_moment_is_opened(tmp_path, monkeypatch):
    """Two processes opening one new SQLite file at once (two searches started together, or a
    reader of the study) both create Optuna's schema, and the second fails on the version stamp
    (seen on CI: a search ended at once with IntegrityError on alembic_version). The search's
    storage opens the file again and finds the schema whole; any other failure is one line at once."""
    import sqlalchemy.exc

    from autotune.search import sqlite, storage

    url = default_storage(tmp_path, "t")
    real_init, calls = sqlite.SQLiteStorage.__init__, []

    def racing_init(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the other process stamps the new file first
            optuna.storages.RDBStorage(url)
            raise sqlalchemy.exc.IntegrityError(
                "INSERT INTO alembic_version", {}, Exception("UNIQUE constraint failed: alembic_version.version_num")
            )
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(sqlite.SQLiteStorage, "__init__", racing_init)
    made = storage.make_storage(url)
    assert len(calls) == 2 and optuna.create_study(storage=made, study_name="s").study_name == "s"

    def broken_init(self, *args, **kwargs):
        calls.append(1)
        raise sqlalchemy.exc.OperationalError("SELECT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(sqlite.SQLiteStorage, "__init__", broken_init)
    calls.clear()
    with pytest.raises(UserError, match="disk I/O error"):
        storage.make_storage(default_storage(tmp_path, "u"))
    assert len(calls) == 1


def test_the_neighbour_phase_leaves_nothing_queued_after_a_resume(tmp_path, h100):
    """A resumed study may hold re-queued trials (a killed worker's): the neighbour phase must
    not queue behind them and leave its own trial waiting when the budget is spent."""
    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 5)
    url = default_storage(tmp_path, "t")
    r = _family(sp, ReplayEvaluator(table, h100), url, trials=10, retime_top=0)
    study = optuna.load_study(study_name=r.study_name, storage=url)
    done = {t.user_attrs.get("config") for t in study.get_trials()}
    requeued = next(c for c in valid if c.name not in done and not isinstance(table[c.name], Status))
    study.enqueue_trial(requeued.as_dict(), user_attrs={"config": requeued.name})
    ev = ReplayEvaluator(table, h100)
    _family(sp, ev, url, trials=13, retime_top=0)  # all 3 in the neighbour phase
    states = [t.state.name for t in study.get_trials()]
    assert "WAITING" not in states and "RUNNING" not in states
    assert requeued.name in ev.calls and len(ev.calls) == 3


def _invalid_point(space, limits):
    """A config inside the space's value lists that the static filter rejects."""
    import itertools

    from autotune.core.types import Config

    valid = {c.name for c in space.enumerate(limits).valid}
    for combo in itertools.product(*space.values.values()):
        cfg = Config.make(space.family.name, dict(zip(space.values, combo, strict=True)))
        if cfg.name not in valid:
            return cfg
    raise AssertionError("every point of the space is valid")


def test_trials_that_need_no_run_are_told_without_one(tmp_path, h100):
    """A proposal outside the valid space is pruned as rejected, one of a config measured
    before is told that config's value, and a re-queued trial that a dead worker measured but
    never told is recorded from its measurement: none of them reaches the evaluator."""
    import socket

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 6)
    ok = {c.name: c for c in valid if not isinstance(table[c.name], Status)}
    url = default_storage(tmp_path, "t")
    ev1, seen = ReplayEvaluator(table, h100), []
    r1 = _family(sp, ev1, url, trials=6, sampler="random", retime_top=0, on_trial=seen.append)
    assert [m.config.name for m in seen] == ev1.calls and len(ev1.calls) == 6
    study = optuna.load_study(study_name=r1.study_name, storage=url)
    first = study.get_trials()
    runs = [t for t in first if t.user_attrs.get("evaluated")]
    assert sorted(t.user_attrs["config"] for t in runs) == sorted(ev1.calls)
    assert {t.user_attrs["worker"] for t in runs} == {f"{socket.gethostname()}:replay"}
    assert all(t.user_attrs["measurement"]["config"]["name"] == t.user_attrs["config"] for t in runs)
    dup = next(t for t in runs if t.state.name == "COMPLETE")
    bad = _invalid_point(sp, h100)
    told = next(c for n, c in ok.items() if n not in ev1.calls)
    m = ReplayEvaluator(table, h100).evaluate([told], P)[0].to_dict()
    m.pop("extra", None)
    study.enqueue_trial(bad.as_dict())
    study.enqueue_trial(dup.params)
    study.enqueue_trial(told.as_dict(), user_attrs={"config": told.name, "evaluated": True, "measurement": m})

    ev2 = ReplayEvaluator(table, h100)
    r2 = _family(sp, ev2, url, trials=7, sampler="random", retime_top=0)
    assert ev2.calls == [] and r2.evaluated == 7
    assert r2.counts == {"rejected": 1, "ok": 1}
    new = {t.user_attrs["config"]: t for t in study.get_trials()[len(first) :]}
    assert new[bad.name].state.name == "PRUNED" and new[bad.name].user_attrs["status"] == "rejected"
    assert new[bad.name].user_attrs["reason"]
    assert new[dup.user_attrs["config"]].state.name == "COMPLETE" and new[dup.user_attrs["config"]].value == dup.value
    assert new[dup.user_attrs["config"]].user_attrs["duplicate"]
    assert new[told.name].state.name == "COMPLETE" and new[told.name].value == table[told.name]


def test_grid_stops_when_its_queue_is_taken(tmp_path, h100):
    """Grid points come only from the queue: once it is empty (here two planned points were
    taken by someone else), the next ask is pruned as unplanned and the worker stops."""
    from autotune.search.plans import plan_family
    from autotune.search.trials import run_trials

    sp = Space.load("coarse1d")
    sp.seeds = []
    _, table = _table(sp, h100, 7)
    url = default_storage(tmp_path, "t")
    plan = plan_family(sp, P, h100, gpu_slug="t", storage=url, trials=5, sampler="grid")
    study = plan.open()
    for _ in range(2):
        study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
    ev = ReplayEvaluator(table, h100)
    run_trials(plan, ev)
    assert len(ev.calls) == 3
    trials = study.get_trials()
    assert [t.user_attrs.get("status") for t in trials].count("unplanned") == 1
    assert not {"WAITING", "RUNNING"} & {t.state.name for t in trials}


def test_every_trial_in_flight_has_a_heartbeat(tmp_path, h100):
    """The trials a worker has in flight beat, so that another worker can tell a dead one's."""
    import sqlite3

    sp = Space.load("coarse2d")
    _, table = _table(sp, h100, 8)
    url = default_storage(tmp_path, "t")
    beats = []

    def look(_cfg):
        with sqlite3.connect(tmp_path / "t" / "optuna.db") as db:
            running = {r[0] for r in db.execute("SELECT trial_id FROM trials WHERE state = 'RUNNING'")}
            beating = {r[0] for r in db.execute("SELECT trial_id FROM trial_heartbeats")}
        beats.append(bool(running) and running <= beating)

    _family(sp, ReplayEvaluator(table, h100, on_evaluate=look), url, trials=8, batch=4, retime_top=0)
    assert len(beats) == 8 and all(beats)


def test_the_search_and_the_gpu_workers_parent_side_import_no_cupy():
    """Only the GPU worker's child process imports CuPy: a search (or a replay) runs without it."""
    import subprocess
    import sys

    code = (
        "import sys, autotune.search.parallel, autotune.search.driver, autotune.search.replay, autotune.gpu.worker; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cupy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_value_list_of_one_is_not_asked_for(tmp_path, h100):
    """Optuna stores every suggested parameter (a commit each); one with a single value tells TPE
    nothing, so the trial loop fills it in without asking."""
    sp = Space.load("coarse2d").without_seeds().for_problem(P)
    _, table = _table(sp, h100)
    url = default_storage(tmp_path, "t")
    r = _family(sp, ReplayEvaluator(table, h100), url, trials=12, retime_top=0)
    single = {p for p, v in sp.values.items() if len(v) == 1}
    assert single  # the layout parameters, pinned to the problem's
    trials = _trials(r, url)
    asked = [t for t in trials if not t.user_attrs.get("planned")]
    assert asked and all(set(t.params) == set(sp.values) - single for t in asked)
    assert r.evaluated == 12 and r.best is None  # retime_top=0: nothing re-timed


def test_a_worker_waits_for_the_start_up_the_others_measure(tmp_path, h100):
    """In a shared TPE study with the queue taken by another worker and fewer than TPE_STARTUP
    configs measured, an ask would be a random draw (mostly outside the valid space): the worker
    waits until the start-up is measured. Alone, it does not wait."""
    from optuna.trial import TrialState

    from autotune.search.plans import plan_family
    from autotune.search.strategies.tpe import TPE_STARTUP
    from autotune.search.trials import TrialLoop

    sp = Space.load("coarse2d").without_seeds()
    valid, table = _table(sp, h100)
    url = default_storage(tmp_path, "t")
    plan = plan_family(sp, P, h100, gpu_slug="t", storage=url, trials=40)
    study = plan.open()
    loop = TrialLoop(plan, ReplayEvaluator(table, h100), shared=True, recover=False)
    lone = TrialLoop(plan, ReplayEvaluator(table, h100), shared=True, recover=False)
    for c in valid[:TPE_STARTUP]:
        study.enqueue_trial(c.as_dict(), user_attrs={"config": c.name})
    lone.refresh()
    assert not lone.waiting_for_startup()  # nobody else has a trial in flight
    other = []
    while study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        other.append(study.ask())  # another worker takes the whole queue
    loop.refresh()
    assert loop.waiting_for_startup() and loop.ask_batch(8) == []
    for t in other:
        t.set_user_attr("evaluated", True)
        study.tell(t, 1000.0)
    loop.refresh()
    assert not loop.waiting_for_startup()


def test_a_shared_sqlite_study_is_read_while_another_process_writes(tmp_path, h100):
    """Write-ahead log: a read of the trials takes no lock, so the workers of one host read the
    study (TPE does for every trial) while one of them writes; and each write lets go of the
    writers' lock."""
    import sqlite3
    import threading

    from autotune.search.storage import make_storage

    sp = Space.load("coarse2d")
    _, table = _table(sp, h100)
    url = default_storage(tmp_path, "t")
    r = _family(sp, ReplayEvaluator(table, h100), url, trials=4, retime_top=0)
    study_id = make_storage(url).get_study_id_from_name(r.study_name)
    path = url.removeprefix("sqlite:///")
    writer = sqlite3.connect(path, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    got = []
    reader = threading.Thread(target=lambda: got.append(len(make_storage(url).get_all_trials(study_id))), daemon=True)
    reader.start()
    reader.join(10)
    writer.execute("ROLLBACK")
    assert got and got[0] >= r.evaluated
    # Writers queue on an OS lock beside the file; after the search none may still hold it.
    import fcntl

    with open(path + ".lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises where it is held


def test_reads_through_optunas_cache_take_no_write_lock(tmp_path):
    """A Study reads its trials through Optuna's cache, which calls the RDB storage's private
    `_get_trials`; search/sqlite.SQLiteStorage overrides it to mark those reads. Should Optuna
    rename or bypass that method, these reads would wait for the writer below (for SQLite's 60 s
    timeout) and the search's workers of one host would read one at a time again."""
    import sqlite3
    import threading

    from autotune.search import storage, strategies, studies

    url = default_storage(tmp_path, "t")
    study = studies.open_study(storage.make_storage(url), "s", strategies.get("random").sampler(0))
    study.enqueue_trial({"x": 1})
    trial_id = study.get_trials(deepcopy=False)[0]._trial_id
    writer = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    got = []

    def read():
        got.append(len(study.get_trials(deepcopy=False)))  # through the cache: the backend's _get_trials
        got.append(study._storage.get_trial(trial_id).number)  # an unfinished trial: the backend's get_trial

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    writer.execute("ROLLBACK")
    assert got == [1, 0]


def test_each_measured_trial_says_where_its_worker_spent_the_time(tmp_path, h100):
    """A trial's "timing": when its evaluation began in its worker's loop, how long it took
    (the compile's wait and the GPU; here the replay's delay), and the host's asks and tells
    since the previous one."""
    sp = Space.load("coarse2d")
    _, table = _table(sp, h100)
    url = default_storage(tmp_path, "t")
    ev = ReplayEvaluator(table, h100, delay_s=0.02)
    r = _family(sp, ev, url, trials=6, sampler="random", retime_top=0)
    runs = [t for t in _trials(r, url) if t.user_attrs.get("evaluated")]
    timing = [t.user_attrs["timing"] for t in sorted(runs, key=lambda t: t.user_attrs["timing"]["at_s"])]
    assert len(timing) == 6 and all(x["evaluate_s"] >= 0.02 and x["host_s"] >= 0 for x in timing)
    assert all(b["at_s"] >= a["at_s"] + a["evaluate_s"] for a, b in zip(timing, timing[1:], strict=False))


def test_search_window_sets_the_trials_in_flight_a_worker(tmp_path, h100, monkeypatch):
    """`search --window N`: the trial loop keeps N trials in flight (the default 8)."""
    import json

    import autotune.search.driver as search_module
    from autotune import cli

    sp = Space.load("coarse2d")
    _, table = _table(sp, h100)
    replay = tmp_path / "table.json"
    replay.write_text(json.dumps({"table": {k: v for k, v in table.items() if not isinstance(v, Status)}}))
    seen = []
    real = search_module.TrialLoop
    monkeypatch.setattr(search_module, "TrialLoop", lambda *a, **k: seen.append(k["batch"]) or real(*a, **k))
    common = ["search", "--size", "512", "--family", "coarse2d", "--trials", "4", "--replay", str(replay)]
    common += ["--results", str(tmp_path / "r"), "--yes", "--quiet"]
    assert cli.main([*common, "--window", "3"]) == 0
    assert cli.main([*common, "--sampler", "random"]) == 0
    assert seen == [3, 8]


def test_a_file_system_without_flock_keeps_sqlite_s_own_wait(tmp_path, h100, monkeypatch):
    """Where the OS lock cannot be taken (a network file system without flock), writes go on
    under SQLite's own locking, as before the OS lock existed."""
    from autotune.search import sqlite

    def no_flock(*_args):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(sqlite.fcntl, "flock", no_flock)
    sp = Space.load("coarse2d")
    _, table = _table(sp, h100)
    url = default_storage(tmp_path, "t")
    r = _family(sp, ReplayEvaluator(table, h100), url, trials=5, retime_top=0)
    assert r.evaluated == 5


def test_the_loop_sets_up_the_problem_while_its_first_window_compiles(tmp_path, h100):
    """A worker process has timed no baseline: its evaluator's inputs are made (setup) after the
    first window is handed to compile, before the first evaluation waits for one."""

    class Recording(ReplayEvaluator):
        def prefetch(self, configs, problem):
            self.events.append("prefetch")

        def setup(self, problem):
            self.events.append("setup")

        def evaluate(self, configs, problem, retime=False):
            self.events.append("evaluate")
            return super().evaluate(configs, problem, retime)

    sp = Space.load("coarse2d")
    valid, table = _table(sp, h100, 6)
    ev = Recording(table, h100)
    ev.events = []
    _family(sp, ev, tmp_path, trials=8, retime_top=0)
    first_eval = ev.events.index("evaluate")
    assert ev.events.count("setup") == 1 and "prefetch" in ev.events[: ev.events.index("setup")]
    assert ev.events.index("setup") < first_eval
