"""The Optuna loop with a replay evaluator: no GPU, real studies, real storage."""

import random

import pytest

from autotune.evaluate import ReplayEvaluator
from autotune.search import default_storage, search, search_family
from autotune.space import Space
from autotune.types import Problem, Status

P = Problem(512, 512, 512)


def _table(space, h100, seed=0):
    valid = space.enumerate(h100).valid
    rng = random.Random(seed)
    table = {c.name: rng.uniform(1000, 20000) for c in valid}
    for c in rng.sample(valid, 5):
        table[c.name] = Status.INCORRECT
    return valid, table


def test_grid_search_finds_the_known_best_and_never_repeats(tmp_path, h100):
    sp = Space.load("coarse1d")
    sp.seeds = []
    valid, table = _table(sp, h100)
    best = max((n for n, v in table.items() if not isinstance(v, Status)), key=table.get)
    ev = ReplayEvaluator(table, h100)
    r = search_family(sp, P, ev, gpu_slug="test", storage=default_storage(tmp_path, "test"),
                      trials=len(valid), sampler="grid", batch=16)
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
    r = search_family(sp, P, ReplayEvaluator(table, h100), gpu_slug="t", storage=default_storage(tmp_path, "t"),
                      trials=10, sampler="random")
    assert r.best.config.name == ok


def test_tpe_starts_from_seeds_and_keeps_the_best(tmp_path, h100):
    sp = Space.load("coarse2d")
    valid, table = _table(sp, h100, 1)
    table[sp.seeds[0].name] = 99999.0
    ev = ReplayEvaluator(table, h100)
    r = search_family(sp, P, ev, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=20, seed=3)
    assert ev.calls[0] == sp.seeds[0].name
    assert r.best.config.name == sp.seeds[0].name and r.evaluated == 20
    assert set(ev.calls) <= {c.name for c in valid}  # invalid proposals never reach the evaluator


def test_resumes_the_same_study_without_repeating(tmp_path, h100):
    sp = Space.load("coarse1d")
    _, table = _table(sp, h100, 2)
    storage = default_storage(tmp_path, "t")
    ev1 = ReplayEvaluator(table, h100)
    r1 = search_family(sp, P, ev1, gpu_slug="t", storage=storage, trials=8, retime_top=0)
    ev2 = ReplayEvaluator(table, h100)
    r2 = search_family(sp, P, ev2, gpu_slug="t", storage=storage, trials=20, retime_top=0)
    assert r1.study_name == r2.study_name and r2.evaluated == 20
    assert len(ev2.calls) == 12 and not set(ev1.calls) & set(ev2.calls)


def test_a_different_space_is_a_different_study(tmp_path, h100):
    a = Space.load("coarse1d")
    b = Space.from_dict(a.family, {"space": {**a.values, "TM": [4, 8]}}, "b.yaml")
    _, table = _table(a, h100)
    storage = default_storage(tmp_path, "t")
    ra = search_family(a, P, ReplayEvaluator(table, h100), gpu_slug="t", storage=storage, trials=3)
    rb = search_family(b, P, ReplayEvaluator(table, h100), gpu_slug="t", storage=storage, trials=3)
    assert ra.study_name != rb.study_name


def test_a_template_edit_is_a_different_study(tmp_path):
    """Configs measured with other template text are other code: a study must not resume them."""
    from autotune.search import study_name
    from autotune.space import TEMPLATE_DIR, Family

    for name in ("coarse1d.cu.j2", "_common.cuh.j2"):
        (tmp_path / name).write_text((TEMPLATE_DIR / name).read_text())
    values = Space.load("coarse1d").values

    def name_now():
        return study_name("t", P, Space.from_dict(Family.load("coarse1d", tmp_path), {"space": values}, "x.yaml"), "tpe")

    first = name_now()
    assert name_now() == first
    (tmp_path / "_common.cuh.j2").write_text((tmp_path / "_common.cuh.j2").read_text() + "// an included file edited\n")
    included = name_now()
    (tmp_path / "coarse1d.cu.j2").write_text((tmp_path / "coarse1d.cu.j2").read_text() + "// the template edited\n")
    assert len({first, included, name_now()}) == 3


def test_timeout_stops_the_search(tmp_path, h100):
    sp = Space.load("coarse2d")
    _, table = _table(sp, h100)
    ev = ReplayEvaluator(table, h100, delay_s=0.05)
    import time
    t0 = time.monotonic()
    out = search([sp], P, ev, timeout_s=1.0, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=500)
    assert time.monotonic() - t0 < 5 and 0 < out[0].evaluated < 100


def test_unreachable_storage_is_a_user_error(h100):
    from autotune.types import UserError
    sp = Space.load("tiled")
    with pytest.raises(UserError, match="storage"):
        search_family(sp, P, ReplayEvaluator({}, h100), gpu_slug="t", storage="sqlite:////nonexistent/dir/x.db")


def _one_step_apart(a, b, space) -> bool:
    moved = [p for p in space.values if a[p] != b[p]]
    if len(moved) != 1:
        return False
    order = sorted(space.values[moved[0]])
    return abs(order.index(a[moved[0]]) - order.index(b[moved[0]])) == 1


def test_tpe_spends_its_last_share_on_neighbours_of_the_best(tmp_path, h100):
    import optuna

    from autotune import search as S

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 2)
    ev = ReplayEvaluator(table, h100)
    r = search_family(sp, P, ev, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=30, seed=1,
                      retime_top=0)
    trials = optuna.load_study(study_name=r.study_name, storage=default_storage(tmp_path, "t")).get_trials()
    local = [t for t in trials if t.user_attrs.get("local")]
    assert 0 < len(local) <= round(S.LOCAL_SHARE * 30)
    by_name = {c.name: c for c in valid}
    for t in local:  # each is one parameter one step away from a config measured before it
        cfg = by_name[t.user_attrs["config"]]
        before = [by_name[u.user_attrs["config"]] for u in trials
                  if u.number < t.number and u.user_attrs.get("evaluated") and u.user_attrs["config"] in by_name]
        assert any(_one_step_apart(cfg, b, sp) for b in before)
    assert len(set(ev.calls)) == len(ev.calls) == 30


def test_random_search_has_no_neighbour_phase(tmp_path, h100):
    import optuna

    sp = Space.load("coarse2d")
    valid, table = _table(sp, h100, 2)
    r = search_family(sp, P, ReplayEvaluator(table, h100), gpu_slug="t", storage=default_storage(tmp_path, "t"),
                      trials=30, sampler="random")
    trials = optuna.load_study(study_name=r.study_name, storage=default_storage(tmp_path, "t")).get_trials()
    assert not [t for t in trials if t.user_attrs.get("local")]


def test_tpe_asks_its_random_start_at_once_then_keeps_a_window(tmp_path, h100):
    from autotune import search as S

    class Recording(ReplayEvaluator):
        def prefetch(self, configs, problem):
            self.sizes = getattr(self, "sizes", []) + [len(configs)]

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 3)
    ev = Recording(table, h100)
    search_family(sp, P, ev, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=20, batch=3)
    assert ev.sizes[0] == S.TPE_STARTUP  # the start-up trials need no results: all asked at once
    assert max(ev.sizes[1:]) == 1  # then one new trial for each one finished (3 in flight)


def test_the_search_runs_whichever_candidate_is_ready_first(tmp_path, h100):
    class LastReady(ReplayEvaluator):
        def first_ready(self, configs, problem):
            self.offered = getattr(self, "offered", []) + [[c.name for c in configs]]
            return len(configs) - 1

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 4)
    ev = LastReady(table, h100)
    search_family(sp, P, ev, gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=12, sampler="random",
                  batch=4, retime_top=0)
    assert [o[-1] for o in ev.offered] == ev.calls  # each evaluation is the one first_ready named
    assert ev.calls[0] != ev.offered[0][0]


def test_one_storage_per_url_until_its_file_is_gone(tmp_path):
    from autotune.search import make_storage

    url = default_storage(tmp_path, "t")
    first = make_storage(url)
    assert make_storage(url) is first
    (tmp_path / "t" / "optuna.db").unlink()
    assert make_storage(url) is not first  # a deleted database is opened afresh
    assert make_storage("memory:x") is make_storage("memory:x") is not make_storage("memory:y")


def test_the_neighbour_phase_leaves_nothing_queued_after_a_resume(tmp_path, h100):
    """A resumed study may hold re-queued trials (a killed worker's): the neighbour phase must
    not queue behind them and leave its own trial waiting when the budget is spent."""
    import optuna

    sp = Space.load("coarse2d")
    sp.seeds = []
    valid, table = _table(sp, h100, 5)
    url = default_storage(tmp_path, "t")
    r = search_family(sp, P, ReplayEvaluator(table, h100), gpu_slug="t", storage=url, trials=10, retime_top=0)
    study = optuna.load_study(study_name=r.study_name, storage=url)
    done = {t.user_attrs.get("config") for t in study.get_trials()}
    requeued = next(c for c in valid if c.name not in done and not isinstance(table[c.name], Status))
    study.enqueue_trial(requeued.as_dict(), user_attrs={"config": requeued.name})
    ev = ReplayEvaluator(table, h100)
    search_family(sp, P, ev, gpu_slug="t", storage=url, trials=13, retime_top=0)  # all 3 in the neighbour phase
    states = [t.state.name for t in study.get_trials()]
    assert "WAITING" not in states and "RUNNING" not in states
    assert requeued.name in ev.calls and len(ev.calls) == 3
