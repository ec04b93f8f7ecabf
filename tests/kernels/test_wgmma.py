"""Without a GPU: the Hopper tensor-core family (wgmma_tf32) -- built for its own target (sm_90a)
and refused elsewhere, its operands prepared in the workspace by a step before the SGEMM kernel,
and its kernel compiled the way the search compiles it."""

import pytest

from autotune.core.types import Config, Problem, Status
from autotune.gpu.compile import CompileError, compile_source
from autotune.kernels.counts import count_key
from autotune.kernels.family import Family
from autotune.kernels.limits import load_profile
from autotune.kernels.render import DEFAULT_KERNEL, render
from autotune.kernels.space import Space
from autotune.search.evaluate import prepare

HIGH = dict(BM=128, BN=128, STAGES=3, GROUP_M=8, PRECISION="high", ACC="fp32")


def test_it_compiles_for_sm_90a_and_only_hopper_runs_it():
    fam = Family.load("wgmma_tf32")
    assert fam.compile_arch("sm_90") == "sm_90a" and Family.load("warptile").compile_arch("sm_80") == "sm_80"
    problem = Problem(256, 256, 256, precision="high")
    sp = Space.load("wgmma_tf32").for_problem(problem)
    assert sp.enumerate(load_profile("h100")).valid
    en = sp.enumerate(load_profile("a100"))
    assert not en.valid and en.top_reasons(1)[0] == ("arch sm_90a", sp.size)
    cfg = fam.resolve(HIGH).config
    (prep,) = prepare([cfg], problem, load_profile("a100"), "sm_80", {})
    assert prep.measurement.status is Status.REJECTED
    assert "needs an sm_90 device (built for sm_90a: wgmma); this one is sm_80" in prep.measurement.message
    # On an H100 the search compiles it for sm_90a, without spills.
    (prep,) = prepare([cfg], problem, load_profile("h100"), "sm_90", {})
    assert prep.measurement is None and prep.spec["resources"]["spill_bytes"] == 0


def test_compiled_for_plain_sm_90_it_stops_with_a_message_naming_the_target():
    src = render(Family.load("wgmma_tf32").resolve(HIGH))
    with pytest.raises(CompileError, match="compile for sm_90a"):
        compile_source(src, "sm_90", DEFAULT_KERNEL, use_cache=False)


@pytest.mark.parametrize("tier, parts", [("high", 2), ("medium", 1)])
def test_its_operands_are_prepared_padded_to_whole_tiles_before_the_kernel(tier, parts):
    plan = Family.load("wgmma_tf32").resolve({**HIGH, "PRECISION": tier}).plan
    g = plan.geometry(200, 300, 100)
    mp, np_, kp = 256, 384, 128  # M, N, K up to whole 128 x 128 tiles and 32-deep k tiles
    assert g.values["ws_bytes"] == 4 * parts * (mp + np_) * kp
    assert [(step.kernel, grid) for step, grid in g.launches] == [
        ("_prepare", (((mp + np_) * kp // 4 + 255) // 256, 1, 1)),  # a thread per 4 floats along k
        ("", (2 * 3, 1, 1)),
    ]
    prep = next(step for step in plan.steps if step.kernel == "_prepare")
    assert prep.args == ("M", "N_k", "K", "A", "lda_k", "B", "ldb_k", "WS")


def test_a_dry_run_counts_the_space_of_the_tier_it_is_asked_for():
    """Both tiers' problems used to share one enumeration (the first one's) in a dry run."""
    wg, warptile = Space.load("wgmma_tf32"), Space.load("warptile")
    high, medium = Problem(64, 64, 64, precision="high"), Problem(64, 64, 64, precision="medium")
    h100 = load_profile("h100")

    def key(sp, problem):  # dry_run's key: problems that build the same space share an enumeration
        return count_key(sp.for_problem(problem), h100)

    assert key(wg, high) != key(wg, medium)
    assert key(warptile, high) == key(warptile, medium)  # an FP32 family's space is one


def test_a_tier_search_keeps_the_seeds_that_fit_it_and_rejects_mistaken_ones(tmp_path):
    """Seeds name their tier; built for the other tier, a medium seed's 128 x 256 tiles need more
    shared memory and registers than high has: that search leaves it out (it used to stop the
    whole search). A seed outside the value lists is still an error naming the file."""
    from autotune.search.plans import make_plan

    h100 = load_profile("h100")
    space = Space.load("wgmma_tf32")
    kwargs = dict(gpu_slug="h100", storage=f"sqlite:///{tmp_path / 'o.db'}")
    for tier in ("high", "medium"):
        plan = make_plan(space, Problem(4096, 4096, 4096, precision=tier), h100, **kwargs)
        assert plan.space.seeds and all(s["PRECISION"] == tier for s in plan.space.seeds)
        valid = set(plan.valid)
        assert all(s in valid for s in plan.space.seeds)
    high = make_plan(space, Problem(64, 64, 64, precision="high"), h100, **kwargs).space.seeds
    assert len(high) < len(space.seeds)  # a medium seed that does not fit high is left out
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "family: wgmma_tf32\nspace: {BM: [128], BN: [128], STAGES: [3], GROUP_M: [8], PRECISION: [high], ACC: [fp32]}\n"
        "seeds:\n  - {BM: 128, BN: 128, STAGES: 4, GROUP_M: 8, ACC: fp32}\n"
        "fallback: {BM: 64, BN: 64, STAGES: 2, GROUP_M: 1, ACC: fp32}\n"
    )
    with pytest.raises(Exception, match=r"bad.yaml: seed .* STAGES=4 not in the value list"):
        make_plan(Space.load("wgmma_tf32", bad), Problem(64, 64, 64, precision="high"), h100, **kwargs)


@pytest.mark.parametrize("layout, boxes", [("nn", ((32, 256), (32, 32))), ("nt", ((32, 256), (32, 128)))])
def test_reading_both_operands_in_place_prepares_nothing_and_passes_tensor_maps(layout, boxes):
    """DIRECT=1: no workspace and no _prepare; the SGEMM kernel takes tensor maps of A and B as
    stored (A's box 32 x BM; B's 32 x 32 boxes where it is stored K x N and its one 32 x BN box where
    it is stored N x K), builds for sm_90a without spills in both layouts, and the family's rules
    leave it out where A is stored K x M or the tier needs split operands (a config of it built for
    such a problem takes the prepared form)."""
    fam = Family.load("wgmma_tf32")
    params = dict(BM=256, BN=128, STAGES=4, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=1)
    problem = Problem(4096, 4096, 4096, layout, precision="medium")
    cfg = fam.built_for(Config.make("wgmma_tf32", params), problem)
    assert cfg["DIRECT"] == 1 and not fam.broken_rules(cfg)
    resolved = fam.resolve(cfg)
    assert resolved.plan.tensor_maps == boxes
    assert resolved.plan.tensor_map_shapes(200, 300, 100) == ((100, 200), (300, 100) if layout == "nn" else (100, 300))
    g = resolved.plan.geometry(200, 300, 100)
    assert g.values["ws_bytes"] == 0
    assert [(step.kernel, grid) for step, grid in g.launches] == [("", (1 * 3, 1, 1))]
    assert resolved.plan.steps[-1].args[-2:] == ("TMAP_A", "TMAP_B")
    (prep,) = prepare([cfg], problem, load_profile("h100"), "sm_90", {})
    assert prep.measurement is None and prep.spec["resources"]["spill_bytes"] == 0
    for other in ({"PRECISION": "high", "ACC": "fp32"}, {"TRANS_A": 1}):
        bad = Config.make("wgmma_tf32", {**cfg.as_dict(), **other})
        assert any("direct reads A as M x K" in why for why in fam.broken_rules(bad)), other
    for other in (Problem(64, 64, 64, precision="high"), Problem(64, 64, 64, "tn", precision="medium")):
        built = fam.built_for(Config.make("wgmma_tf32", {**params, "BM": 128}), other)  # 256 rows do not fit high
        assert built["DIRECT"] == 0 and not fam.broken_rules(built), other
        assert fam.resolve(built).plan.tensor_maps is None


def test_the_transposed_form_takes_64_columns_a_consumer_and_mends_to_prepared_where_it_cannot():
    """B stored K x N: the consumers multiply C^T, 64 columns of the tile each, so BN must be a
    multiple of 64 there (not where B is stored N x K); an nt config with 96 columns built for nn
    goes back to the prepared form."""
    fam = Family.load("wgmma_tf32")
    params = dict(BM=128, BN=96, STAGES=4, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=1, TRANS_B=1)
    assert not fam.broken_rules(Config.make("wgmma_tf32", params))
    assert fam.resolve(Config.make("wgmma_tf32", {**params, "BN": 128, "TRANS_B": 0})).env["CONSUMERS"] == 2
    nn = fam.built_for(Config.make("wgmma_tf32", params), Problem(64, 64, 64, precision="medium"))
    assert nn["DIRECT"] == 0 and nn["BN"] == 96 and not fam.broken_rules(nn)
