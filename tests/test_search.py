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
