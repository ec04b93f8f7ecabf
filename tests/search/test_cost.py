"""The static cost model (autotune/search/cost.py) and how a search without seeds starts from it."""

import random

import optuna
import pytest

from autotune.core.types import Config, Problem
from autotune.kernels.family import known_families
from autotune.kernels.space import Space
from autotune.search import cost
from autotune.search.driver import search_family
from autotune.search.neighbours import next_neighbour
from autotune.search.plans import make_plan
from autotune.search.replay import ReplayEvaluator
from autotune.search.storage import default_storage
from autotune.search.strategies.tpe import TPE_STARTUP

SQUARE = Problem(4096, 4096, 4096)


@pytest.fixture(scope="module")
def warptile():
    return Space.load("warptile")


def _estimate(space, params, problem, limits, **changes):
    fam = space.family
    return cost.estimate(fam, fam.derive(Config.make(fam.name, {**params, **changes}).as_dict()), problem, limits)


def test_the_model_orders_the_known_regimes(warptile, h100):
    """What is known of FFMA SGEMM, as orderings: a 128 x 256 tile with 128 accumulators a thread
    (the best config measured at 4096^3) above the mid-size fallback, above a one-warp 32 x 32
    tile; split-K loses where the tiles fill the GPU and wins where a deep K leaves it idle; a
    grid of one wave plus one tile loses to a split schedule; a register cap that forces spills
    ranks last."""
    best = warptile.seeds[0].as_dict()
    at = lambda problem=SQUARE, **ch: _estimate(warptile, best, problem, h100, **ch)  # noqa: E731
    tiny = dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, LANES_N=8, TM=4, STAGES=2)
    fallback = cost.estimate(warptile.family, warptile.family.derive(warptile.fallback.as_dict()), SQUARE, h100)
    assert at() > fallback > at(**tiny)
    assert at(SPLITK=4) < at(SPLITK=1)
    deep = Problem(1024, 1024, 8192)  # 32 tiles of 128 x 256 on 132 SMs
    assert at(deep, SPLITK=4) > 2 * at(deep, SPLITK=1)
    one_wave_and_one = Problem(7 * 128, 19 * 256, 4096)  # 133 tiles
    assert at(one_wave_and_one, SCHEDULE="split_launch") > 1.5 * at(one_wave_and_one, SCHEDULE="data_parallel")
    assert at(MINB=2) < 0.01 * at()  # 256 threads x 2 blocks: 128 registers for 128 accumulators


def test_the_model_applies_to_ffma_tiles_only():
    """The families whose YAML declares the cost model's inputs: FFMA register tiles, each thread
    owning its outputs over all of K (not tiny's groups that share K, nor tensor cores, nor streams)."""
    spaces = [Space.load(f) for f in known_families()]
    assert {sp.family.name for sp in spaces if cost.applies(sp.family, [sp.fallback])} == {
        "coarse1d",
        "coarse2d",
        "vectorized",
        "warptile",
    }


@pytest.mark.slow  # ranks warptile's whole space (about 10 s)
def test_the_startup_is_the_best_estimated_of_distinct_tile_shapes(warptile, h100):
    space = warptile.without_seeds().for_problem(SQUARE)
    valid = space.enumerate(h100).valid
    fam = space.family
    picks = cost.startup(fam, valid, SQUARE, h100, 10, seed=1)
    assert len(picks) == 10 and set(picks) <= set(valid)
    shapes = [tuple(cost.inputs(fam, fam.derive(c.as_dict()))[k] for k in cost.SHAPE_KEYS) for c in picks]
    assert len(set(shapes)) == 10
    assert picks == cost.startup(fam, valid, SQUARE, h100, 10, seed=1)  # seeded
    estimates = [cost.estimate(fam, fam.derive(c.as_dict()), SQUARE, h100) for c in picks]
    assert estimates == sorted(estimates, reverse=True)
    others = random.Random(0).sample(valid, 2000)
    assert max(cost.estimate(fam, fam.derive(c.as_dict()), SQUARE, h100) for c in others) <= estimates[0]
    # The stored best config's block tile, depth and threads are the model's first choice (the
    # rest is the model's blind spot: the search's).
    tile = ("BM", "BN", "BK", "THREADS")
    assert [fam.derive(picks[0].as_dict())[k] for k in tile] == [warptile.seeds[0][k] for k in tile[:3]] + [256]
    tiled = Space.load("tiled")
    assert cost.startup(tiled.family, tiled.enumerate(h100).valid, SQUARE, h100, 10, 1) == []


def test_a_search_without_seeds_starts_from_the_model_and_a_seeded_one_does_not(tmp_path, h100):
    sp = Space.load("coarse2d")
    valid = sp.enumerate(h100).valid
    table = {c.name: random.Random(c.name).uniform(1000, 20000) for c in valid}
    kwargs = dict(gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=16, seed=2)
    assert make_plan(sp, SQUARE, h100, **kwargs).startup == []
    plan = make_plan(sp.without_seeds(), SQUARE, h100, **kwargs)
    assert len(plan.startup) == TPE_STARTUP
    ev = ReplayEvaluator(table, h100)
    search_family(sp.without_seeds(), SQUARE, ev, **kwargs)
    assert ev.calls[:TPE_STARTUP] == [c.name for c in plan.startup]
    random_plan = make_plan(sp.without_seeds(), SQUARE, h100, **{**kwargs, "sampler": "random"})
    assert random_plan.startup == []  # only TPE's start-up is the model's


def test_a_window_wider_than_tpes_start_up_is_filled_from_the_model(tmp_path, h100):
    """--window 16: the first window's 16 trials are the model's picks, not 10 of them and six of
    TPE's random draws (nearly all outside the valid space: each a rejection's asks and tells)."""
    sp = Space.load("coarse2d").without_seeds()
    kwargs = dict(gpu_slug="t", storage=default_storage(tmp_path, "t"), trials=40, seed=2)
    assert len(make_plan(sp, SQUARE, h100, window=4, **kwargs).startup) == TPE_STARTUP
    plan = make_plan(sp, SQUARE, h100, window=16, **kwargs)
    assert len(plan.startup) == 16
    assert len(make_plan(sp, SQUARE, h100, window=16, workers=2, **kwargs).startup) == 32
    valid = sp.enumerate(h100).valid
    ev = ReplayEvaluator({c.name: random.Random(c.name).uniform(1000, 20000) for c in valid}, h100)
    search_family(sp, SQUARE, ev, batch=16, **kwargs)
    assert ev.calls[:16] == [c.name for c in plan.startup]
    study = optuna.load_study(study_name=plan.name, storage=kwargs["storage"])
    first = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)[:16]
    assert all(t.user_attrs.get("planned") for t in first)  # none of them TPE's draws


def test_neighbours_follow_the_rank_when_given(h100):
    sp = Space.load("coarse2d")
    valid = sp.enumerate(h100).valid
    by_name = {c.name: c for c in valid}
    best = valid[len(valid) // 2]
    measured = {best.name: (optuna.trial.TrialState.COMPLETE, 1.0)}
    near = [next_neighbour(sp, by_name, measured, set(), random.Random(s)) for s in range(20)]
    assert len({c.name for c in near}) > 1  # unranked: a random step
    order = {name: i for i, name in enumerate(sorted(by_name))}
    rank = lambda c: order[c.name]  # noqa: E731 - no two configs rank equal
    ranked = {next_neighbour(sp, by_name, measured, set(), random.Random(s), rank).name for s in range(20)}
    assert len(ranked) == 1
    assert rank(by_name[ranked.pop()]) >= max(rank(c) for c in near)
