"""search --priors: configs tuned on another GPU, tried here like seeds where they are valid."""

import pytest
from helpers import GPU
from helpers import one_clear_line as _one_clear_line
from helpers import record_entry as _entry
from helpers import run_cli as run

from autotune.core.types import Config, Problem
from autotune.kernels.space import Space
from autotune.records.results import stored_priors
from autotune.records.store import update_record
from autotune.search.plans import make_plan, queue_plan

# Three valid vectorized points that are not its seeds, and one outside its value lists (TM 3).
A, B, C = ({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8},
           {"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4})  # fmt: skip
OUTSIDE = {"BM": 64, "BN": 64, "BK": 8, "TM": 3, "TN": 4}


def _records(root, h100, shapes):
    for problem, params in shapes:
        update_record(root, GPU, problem, {"vectorized": _entry("vectorized", params, 9000.0, h100, problem)})
    return GPU["slug"]


def test_the_nearest_shapes_of_the_same_layout_come_first(tmp_path, h100):
    slug = _records(
        tmp_path,
        h100,
        [(Problem(1000, 1000, 1000), A), (Problem(4096, 4096, 4096), B), (Problem(1100, 1100, 1100, "nt"), C)],
    )
    cfg = {name: Config.make("vectorized", p) for name, p in (("A", A), ("B", B), ("C", C))}
    got = stored_priors(tmp_path, slug, "vectorized", Problem(1200, 1200, 1200))
    assert got == [cfg["A"], cfg["B"], cfg["C"]]  # C is nearer, but of another layout
    assert stored_priors(tmp_path, slug, "vectorized", Problem(1200, 1200, 1200, "nt")) == [
        cfg["C"],
        cfg["A"],
        cfg["B"],
    ]
    assert stored_priors(tmp_path, slug, "vectorized", Problem(5000, 5000, 5000), nearest=1) == [cfg["B"]]
    assert stored_priors(tmp_path, slug, "coarse2d", Problem(1200, 1200, 1200)) == []
    assert stored_priors(tmp_path, slug, "vectorized", Problem(1200, 1200, 1200, precision="high")) == []


def test_priors_follow_the_seeds_where_they_are_valid_and_start_their_own_study(tmp_path, h100):
    space = Space.load("vectorized")
    problem = Problem(1024, 1024, 1024)
    priors = [Config.make("vectorized", p) for p in (A, OUTSIDE, space.seeds[0].as_dict())]
    kw = dict(gpu_slug="x", storage=f"sqlite:///{tmp_path / 'optuna.db'}", trials=30)
    plain = make_plan(space, problem, h100, **kw)
    plan = make_plan(space.with_priors(priors), problem, h100, **kw)
    pinned = space.family.built_for(priors[0], problem)
    # The outside point is left out without an error, the seed is not tried twice.
    assert plan.space.seeds == [*plain.space.seeds, pinned] and plan.space.priors == [pinned]
    assert plan.name != plain.name and not plan.startup
    # Without seeds (the one among the priors now counts): the priors first, then the cost model's
    # start-up, each config once.
    cold = make_plan(space.without_seeds().with_priors(priors), problem, h100, **kw)
    assert cold.space.seeds == [pinned, plain.space.seeds[0]] and cold.startup
    queue_plan(cold)
    names = [t.user_attrs["config"] for t in cold.open().get_trials(deepcopy=False)]
    assert names[:2] == [c.name for c in cold.space.seeds]
    assert len(names) == len(set(names)) == len({*cold.space.seeds, *cold.startup})
    # A prior stored for another layout is built for this one.
    stored_nt = space.family.resolve({**A, "TRANS_B": 1}).config
    nn = make_plan(space.with_priors([stored_nt]), problem, h100, **kw)
    assert nn.space.priors == [pinned]


def test_an_unknown_prior_gpu_is_one_clear_line_before_any_gpu_work(tmp_path):
    r = run("search", "--size", "64", "--priors", "no-such-gpu", "--results", str(tmp_path), "--dry-run")
    assert "no-such-gpu" in _one_clear_line(r)


@pytest.mark.slow  # plans a search in worker processes, cold and with priors (about 35 s)
def test_a_worker_process_plans_the_parents_study_seeded_cold_or_with_priors(h100):
    """search --workers: each process loads the space again (a Space does not pickle); with the
    priors lost it would name another study and measure beside the one the parent queued."""
    import pickle

    from autotune.search.parallel import portable, rebuilt

    base = Space.load("warptile")
    problem = Problem(2048, 2048, 2048)
    kw = dict(gpu_slug="h100", storage="memory:w", trials=30)
    priors = [Config.make("vectorized", A)]
    vec = Space.load("vectorized").with_priors(priors)
    for sp in (base, base.without_seeds(), vec, vec.without_seeds()):
        parent = make_plan(sp, problem, h100, **kw)
        worker = make_plan(
            rebuilt(pickle.loads(pickle.dumps(portable(sp)))), problem, h100, queued_by_parent=True, **kw
        )
        assert worker.name == parent.name and worker.ranked == parent.ranked
        assert worker.space.seeds == parent.space.seeds and worker.startup == []
    cold = make_plan(base.without_seeds(), problem, h100, **kw)
    assert cold.ranked and len(cold.startup) == 10  # the parent ranks and queues the model's start-up
    assert not make_plan(vec, problem, h100, **kw).ranked  # seeded: TPE's own order
