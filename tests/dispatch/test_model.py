"""The model that carries a stored measurement to a shape nobody tuned (autotune/dispatch/model.py):
occupancy, wave quantisation, the roofline, and a choice that the nearest shape would get wrong.
No GPU: plans, limits and times are written out here."""

import math

import pytest

from autotune.core.types import Config, Problem
from autotune.dispatch import model
from autotune.kernels.family import Family
from autotune.kernels.space import Space

H100 = {"sm_count": 132, "regs_per_sm": 65536, "smem_per_sm": 233472}
ROOF = model.Roof(bytes_per_ms=3.0e9, flops_per_ms=50e9)  # 3 TB/s, 50 TFLOP/s


def _plan(family: str, **params):
    fam = Family.load(family)
    return fam.resolve({**Space.load(family).fallback.as_dict(), **params}).plan


def _warptile(**params):
    base = {"SCHEDULE": "data_parallel", "SPLITK": 1, "BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 4}
    return _plan("warptile", **(base | params))


def test_slots_follow_the_tightest_resource():
    plan = _warptile()  # 256 threads
    assert plan.block == 256
    assert model.slots(plan, 128, 1024, H100) == 2 * 132  # 128 registers: 16 warps of 8 -> 2 blocks
    assert model.slots(plan, 64, 100_000, H100) == 2 * 132  # shared memory: 2 blocks of 101 KB
    assert model.slots(plan, 32, 0, H100) == 8 * 132  # 2048 threads
    assert model.slots(plan, 255, 200_000, H100) == 132  # never below one block an SM
    tiled = _plan("tiled", TILE=32)  # 1024 threads
    assert model.slots(tiled, 30, 8448, H100) == 2 * 132


def test_a_measurement_predicts_itself_and_waves_quantise():
    plan = _warptile()
    n_slots = model.slots(plan, 128, 50_000, H100)  # 264
    at = Problem(128 * 12, 128 * 22, 4096)  # 264 tiles: one full wave
    c = model.Candidate(at, plan, plan, 2.0, n_slots, 132, None)
    assert c.predict_ms(at, ROOF) == pytest.approx(2.0)
    one_more = Problem(128 * 12 + 1, 128 * 22, 4096)  # 286 tiles: a third block on some SMs
    body = 2.0 - model.LAUNCH_US * 1e-3
    # Two blocks an SM take 2 ** (1 - SHARING) times one alone; a third waits for a slot.
    two, three = 2 ** (1 - model.SHARING), 2 ** (1 - model.SHARING) + 1
    assert (model.sm_load(264, 2, 132), model.sm_load(286, 2, 132)) == pytest.approx((two, three))
    # Whole tiles, each 4096 deep: the launches are apart by their blocks alone.
    launch_at, launch_more = (model.busiest_sm(plan, q, 2, 132) for q in (at, one_more))
    assert (launch_at.blocks, launch_more.blocks) == (264, 286)
    assert launch_at.depth == launch_more.depth == pytest.approx(4096)
    assert model.apart(launch_at, launch_more) == pytest.approx(math.log(286 / 264))
    expected = (body * three / two + model.LAUNCH_US * 1e-3) * (
        1 + model.DISTANCE_WEIGHT * model.apart(launch_at, launch_more)
    )
    assert c.predict_ms(one_more, ROOF) == pytest.approx(expected)
    deeper = Problem(128 * 12, 128 * 22, 8192)  # the same tiles, twice the k-iterations
    assert c.predict_ms(deeper, ROOF) > 2 * body


def test_a_measurement_carries_to_a_far_shape_with_the_same_launch():
    """How far a prediction is trusted goes by the launch, not the shape: M and N swapped give the
    same 432 tiles, each as deep, so the measurement is the prediction, though log(M, N, K) puts
    the shapes 2.3 apart; a launch with more blocks or deeper blocks is further."""
    plan = _warptile()
    at, swapped = Problem(128 * 12, 128 * 36, 4096), Problem(128 * 36, 128 * 12, 4096)
    c = model.Candidate(at, plan, plan, 2.0, model.slots(plan, 128, 50_000, H100), 132, None)
    assert model.distance(at, swapped) > 2
    assert c.predict_ms(swapped, model.Roof(math.inf, math.inf)) == pytest.approx(2.0)
    launches = [model.busiest_sm(plan, q, 2, 132) for q in (at, swapped, Problem(128 * 12, 128 * 36, 8192))]
    assert model.apart(launches[0], launches[1]) == 0
    assert model.apart(launches[0], launches[2]) == pytest.approx(math.log(2))


def test_no_prediction_beats_the_roofline():
    plan = _warptile()
    c = model.Candidate(Problem(4096, 4096, 4096), plan, plan, 1e-6, 264, 132, None)  # an absurd time
    p = Problem(8192, 8192, 8192)
    assert c.predict_ms(p, ROOF) >= p.flops / ROOF.flops_per_ms
    skinny = Problem(1, 8192, 8192)
    assert c.predict_ms(skinny, ROOF) >= skinny.bytes / ROOF.bytes_per_ms


def test_a_split_k_kernel_tuned_far_away_beats_the_nearest_big_tile_on_a_deep_k():
    """1024 x 1024 x 16384: the nearest record, 1024^3 x 4096 with 32 tiles of 128 x 256, leaves
    most SMs idle; a split-K config measured at 64 x 64 x 65536 fills them and wins, though far."""
    big = _warptile(BN=256, WARPS_N=4)
    split = _warptile(BM=64, BN=64, WARPS_M=2, WARPS_N=2, SPLITK=32)
    near, far = Problem(1024, 1024, 4096), Problem(64, 64, 65536)
    target = Problem(1024, 1024, 16384)
    cands = [
        model.Candidate(near, big, big, near.flops / 12e9, model.slots(big, 128, 100_000, H100), 132, "big"),
        model.Candidate(far, split, split, far.flops / 5e9, model.slots(split, 96, 40_000, H100), 132, "split"),
    ]
    assert model.distance(near, target) < model.distance(far, target)
    best, t = model.fastest(cands, target, ROOF)
    assert best.what == "split" and math.isfinite(t)


def test_a_streaming_kernel_pays_for_rereading_its_operand():
    """fewrows with MR rows a block: 16 x the rows is 16 x the blocks, each reading its slab of B
    again (the ideal bytes, A and B read once, hardly change)."""
    plan = _plan("fewrows", MR=1)
    at, more = Problem(1, 4096, 4096), Problem(16, 4096, 4096)
    c = model.Candidate(at, plan, plan, at.bytes / 2.7e9, model.slots(plan, 40, 2048, H100), 132, None)
    assert more.bytes < 1.01 * at.bytes
    assert c.predict_ms(more, ROOF) > 2 * c.predict_ms(at, ROOF)  # more waves of blocks: 3x here


def test_the_api_asks_the_model_only_where_nothing_was_measured(tmp_path):
    """A tuned shape's own record is used as measured; the candidates of another shape are every
    family's best that is meant for it (fewrows is not meant for 4096 rows)."""
    from autotune.dispatch import table as dispatch_table

    fewrows = Config.make("fewrows", Space.load("fewrows").fallback.as_dict())
    wt = Config.make("warptile", Space.load("warptile").fallback.as_dict())

    def entry(cfg, shape, ms):
        lim = dict(H100, name="NVIDIA H100", arch="sm_90")
        params = cfg.as_dict()
        return {"config": {"family": cfg.family, "params": params}, "time_ms": ms, "registers": 64,
                "smem_bytes": 20000, "limits": lim, "gflops": shape.flops / ms / 1e6}  # fmt: skip

    s1, s2 = Problem(1, 4096, 4096), Problem(2048, 2048, 2048)
    table = dispatch_table._Table(
        "x", None, [(s1, {"fewrows": entry(fewrows, s1, 0.012)}), (s2, {"warptile": entry(wt, s2, 0.35)})], True
    )
    shape, _, cfg, predicted = table.choose(s2, None)
    assert (shape, cfg.family, predicted) == (s2, "warptile", None)
    shape, _, cfg, predicted = table.choose(Problem(4096, 4096, 1024), None)
    assert shape == s2 and cfg.family == "warptile" and predicted > 0
    shape, _, cfg, _ = table.choose(Problem(2, 4096, 4096), None)
    assert cfg.family == "fewrows"


def test_blocks_sharing_an_sm_share_its_issue_rate():
    """A small tile measured with one block on each SM (all the SM to itself) does not run eight
    times the blocks in the same time because eight fit at once: resident blocks divide the SM's
    issue rate (partly: more warps also hide more latency), so the prediction grows with them."""
    plan = _plan("vectorized", BM=32, BN=64, BK=32, TM=4, TN=4)
    n_slots = model.slots(plan, 40, 8192, H100)
    assert n_slots >= 8 * 132
    at = Problem(32 * 12, 64 * 11, 512)  # 132 tiles: one a SM
    crowded = Problem(32 * 12 * 8, 64 * 11, 512)  # 1056 tiles: eight a SM, all resident at once
    c = model.Candidate(at, plan, plan, 0.02, n_slots, 132, None)
    no_roof = model.Roof(math.inf, math.inf)  # the time model alone
    body = 0.02 - model.LAUNCH_US * 1e-3
    alone = body + model.LAUNCH_US * 1e-3
    apart = model.apart(*(model.busiest_sm(plan, q, n_slots // 132, 132) for q in (at, crowded)))
    assert c.predict_ms(crowded, no_roof) / (1 + model.DISTANCE_WEIGHT * apart) == pytest.approx(
        body * 8 ** (1 - model.SHARING) + model.LAUNCH_US * 1e-3
    )
    assert c.predict_ms(crowded, no_roof) > 1.5 * alone


def test_the_copy_of_c_in_counts_as_a_launch_only_with_beta():
    """A split launch whose C goes through a packed copy: the copy back always runs, the copy in
    only when beta != 0 (with beta = 0 no kernel reads C), and the model counts what runs."""
    plan = _warptile(SCHEDULE="split_persistent", BN=256, WARPS_N=4, PACKB=1)
    p = Problem(300, 4097, 700)  # 51 tiles on 132 or more slots: all in the tail, C packed
    at_zero = model.busiest_sm(plan, p, 1, 132).launches
    at_three = model.busiest_sm(plan, p.with_beta(3.0), 1, 132).launches
    assert (at_zero, at_three) == (3, 4)  # packed B, the kernel, packed C back; then the copy in
    aligned = Problem(300, 4096, 700)
    assert model.busiest_sm(plan, aligned.with_beta(3.0), 1, 132).launches == 1


def test_a_stream_k_owner_pays_for_its_peers_partials():
    assert model.fixup(128, 128, 64, 128, 396) == model.FIXUP_K * (396 / 2 - 1) * 2 * 64 * 128
    assert model.fixup(128 * 396, 128, 128, 128, 396) == 0.0  # whole waves: no tile shared
    assert model.fixup(128 * 400, 128, 128, 128, 396) == 0.0  # 400 tiles shared by 396: none by two
    assert model.fixup(128, 128, 64, 128, 0) == 0.0


def test_a_stream_k_block_pays_for_each_tile_it_visits():
    """At short K a stream-K block runs many tiles, each with its start and end: the load grows
    by TILE_K k-steps a tile visited, so a deep-K measurement does not carry there as if free."""
    stream = _warptile(SCHEDULE="stream_k")
    data_parallel = _warptile()
    p = Problem(128 * 40, 128 * 33, 16)  # 1320 tiles on 132 blocks: ten a block
    visited = model.busiest_sm(stream, p, 1, 132)
    assert visited.blocks == 132
    steps = model.TILE_K * 2.0 * 128 * 128 * 10  # ten tiles' starts and ends
    assert visited.load == pytest.approx(visited.depth * 2.0 * 128 * 128 + steps)
    assert visited.load > 2 * visited.depth * 2.0 * 128 * 128  # more than the K it sums, at K = 16
    # A data-parallel grid's blocks each run one tile: their start and end are in the measured time.
    plain = model.busiest_sm(data_parallel, p, 1, 132)
    assert plain.load == pytest.approx(10 * 2.0 * 128 * 128 * 16)


def test_a_split_tail_pays_for_the_blocks_that_share_each_tile(monkeypatch):
    """A split schedule's tail tiles are summed by atomic adds from every block sharing them: the
    load grows by SPLIT_FIXUP_K k-steps a block beyond the first, a tile."""
    assert model.split_fixup(20, 292, 8, 528, 32, 256) == model.SPLIT_FIXUP_K * (528 / 20 - 1) * 2 * 32 * 256
    assert model.split_fixup(20, 16, 8, 528, 32, 256) == model.SPLIT_FIXUP_K * (40 / 20 - 1) * 2 * 32 * 256
    assert model.split_fixup(20, 8, 8, 528, 32, 256) == 0.0  # one k-step a tile: one block each
    assert model.split_fixup(0, 4096, 8, 528, 32, 256) == 0.0  # no tail
    fused = _warptile(SCHEDULE="split_fused", BM=32, BN=256, WARPS_M=1, WARPS_N=2, BK=8)
    p = Problem(292, 292, 292)  # 20 tiles, all in the tail of 528 slots
    with_tail, k = model.busiest_sm(fused, p, 4, 132).load, model.SPLIT_FIXUP_K
    monkeypatch.setattr(model, "SPLIT_FIXUP_K", 0.0)
    without = model.busiest_sm(fused, p, 4, 132).load
    assert k > 0 and with_tail - without == pytest.approx(k * (528 / 20 - 1) * 2 * 32 * 256)
