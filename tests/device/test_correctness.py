"""On the GPU: every family correct at awkward shapes, verified against cuBLAS (FP64 reference)."""

import random

import pytest
from helpers import AWKWARD_SHAPES, families, tier_of

from autotune.core.types import Config, Problem, Status
from autotune.dispatch.table import built_for
from autotune.kernels.family import Family
from autotune.kernels.space import Space

pytestmark = pytest.mark.gpu


# The strict-FP32 families (the tensor-core tiers have their contracts: test_tiers_gpu.py).
FAMILIES = [f for f in families() if tier_of(f) == "highest"]


def _configs() -> list[Config]:
    """Each family's seeds plus a few random valid points (fixed seed), and warptile's
    split-K, pipeline-depth, padding, schedule, A- and B-as-stored and 16-row tile variants."""
    from autotune.kernels.limits import load_profile

    lim = load_profile("h100")
    rng = random.Random(7)
    out = []
    for fam in FAMILIES:
        sp = Space.load(fam)
        valid = sp.enumerate(lim).valid
        out += sp.seeds + rng.sample(valid, min(4, len(valid)))
    base = Space.load("warptile").seeds[0].as_dict()
    for variant in (
        {"SPLITK": 4, "MINB": 1},
        {"SPLITK": 3, "MINB": 1},
        {"STAGES": 2},
        {"STAGES": 4},
        {"SCHEDULE": "stream_k", "BK": 8},
        {"SCHEDULE": "stream_k", "GROUP_M": 1, "BK": 8, "PAD_A": 0},
        {"PACKB": 0},
        {"PACKB": 0, "SCHEDULE": "stream_k"},  # B unpacked: 4-byte copies where N % 4 != 0
        # B stored N x K transposed into the workspace first (run in the layouts that have it).
        {"TRANS_B": 1, "PACKB": 2, "SCHEDULE": "stream_k", "BK": 8},
        {"TRANS_B": 1, "PACKB": 2, "SCHEDULE": "split_persistent"},
        {"TRANS_B": 1, "PACKB": 2, "SPLITK": 3, "MINB": 1},
        {"PAD_A": 0, "PAD_B": 4, "GROUP_M": 1},
        {"BK": 32, "LANES_N": 8},
        {"PREFETCH": 0},
        {"PREFETCH": 0, "SPLITK": 2, "MINB": 1, "STAGES": 2},
        *(
            {"SCHEDULE": s, **v}
            for s in ("split_launch", "split_persistent", "split_fused")
            for v in ({}, {"PACKB": 0}, {"GROUP_M": 1, "BK": 8})
        ),
        # 16-row tiles (one warp row of 16: 4 lanes x 4 rows) in every schedule.
        *(
            {"BM": 16, "BN": 64, "WARPS_M": 1, "WARPS_N": 2, "TM": 4, "LANES_N": 8, "SCHEDULE": s, **v}
            for s, v in (
                ("data_parallel", {"SPLITK": 3, "MINB": 4}),
                ("data_parallel", {"SPLITK": 2, "PACKB": 0}),
                ("stream_k", {"BK": 8}),
                ("split_launch", {}),
                ("split_persistent", {}),
                ("split_fused", {}),
            )
        ),
    ):
        out.append(Config.make("warptile", {**base, **variant}))
    return list(dict.fromkeys(out + A_ROWS_CONFIGS + B_ROWS_CONFIGS))


# warptile with A's tile kept as stored (16-byte copies along k, a thread's rows LANES_M apart), on
# a 64 x 64 tile (the seeds' 128 x 256 one spills with it): BK 8 and 32, with and without the
# cross-tile prefetch, split-K, every schedule, B unpacked, 8 lanes along M, a 128 x 16 tile.
_SMALL = {
    "BM": 64,
    "BN": 64,
    "BK": 16,
    "WARPS_M": 2,
    "WARPS_N": 2,
    "LANES_N": 8,
    "TM": 4,
    "TN": 4,
    "MINB": 2,
    "STAGES": 3,
}
A_ROWS_CONFIGS = [
    Config.make("warptile", {**Space.load("warptile").seeds[0].as_dict(), **_SMALL, "A_ROWS": 1, **v})
    for v in (
        {},
        {"BK": 8, "PREFETCH": 0},
        {"BK": 32, "SPLITK": 3},
        {"LANES_N": 4, "PREFETCH": 0, "SPLITK": 2},
        {"SCHEDULE": "stream_k", "BK": 8},
        {"SCHEDULE": "split_launch"},
        {"SCHEDULE": "split_persistent", "PACKB": 0},
        {"SCHEDULE": "split_fused"},
        {"BM": 128, "BN": 16, "BK": 32, "WARPS_M": 4, "WARPS_N": 1, "LANES_N": 4, "SPLITK": 4, "STAGES": 4},
        # A copied to a 16-byte pitch first where K % 4 != 0 (PACKA), after B, C and the schedule's own
        {"PACKA": 1},
        {"PACKA": 1, "SCHEDULE": "stream_k", "BK": 8},
        {"PACKA": 1, "SCHEDULE": "split_launch"},
    )
]
# B stored N x K with its tile kept so (B_ROWS): the same tile and variants, with A's both ways.
_B_ROWS = {**Space.load("warptile").seeds[0].as_dict(), **_SMALL, "TRANS_B": 1, "B_ROWS": 1, "PAD_B": 4}
B_ROWS_CONFIGS = [
    Config.make("warptile", {**_B_ROWS, **v})
    for v in (
        {},
        {"BK": 8, "PREFETCH": 0, "PAD_B": 0},
        {"BK": 32, "SPLITK": 3},
        {"LANES_N": 4, "PREFETCH": 0, "SPLITK": 2},
        {"SCHEDULE": "stream_k", "BK": 8},
        {"SCHEDULE": "split_launch", "A_ROWS": 1},
        {"SCHEDULE": "split_persistent"},
        {"SCHEDULE": "split_fused", "MINB": 1},
        {"BM": 128, "BN": 16, "BK": 32, "WARPS_M": 4, "WARPS_N": 1, "LANES_N": 4, "SPLITK": 4, "STAGES": 4},
    )
]

CONFIGS = _configs()


@pytest.mark.parametrize("shape", AWKWARD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_all_families_correct(gpu_evaluator, shape):
    problem = Problem(*shape)
    # Built for nn: a config written for B stored N x K (PACKB 2) is its in-place form here.
    configs = [c for c in dict.fromkeys(built_for(c, "nn") for c in CONFIGS) if c is not None]
    ms = gpu_evaluator.evaluate(configs, problem, verify_only=True)
    ran = [m for m in ms if m.status is not Status.REJECTED]
    assert {m.config.family for m in ran} == set(FAMILIES)
    bad = [f"{m.config.name}: {m.status.value} {m.message}" for m in ran if m.status is not Status.OK]
    assert not bad, "\n".join(bad)
    assert all(m.error < 1e-5 for m in ran), max(m.error for m in ran)


@pytest.mark.parametrize("shape", [(1, 4097, 3001), (37, 1001, 777), (5, 33, 5000), (16, 4096, 4096), (3, 6, 2)])
def test_fewrows_warps_along_k_and_k_major_a_correct(gpu_evaluator, shape):
    """fewrows with WK warps of a block along K, their sums met in shared memory, and A's chunk
    k-major (AK): several row groups (M > MR), K not a whole number of chunks or steps, N % 4 != 0,
    A in either layout, one chunk (no split) and several (atomics or the last block), against FP64."""
    points = [
        (1, 1, 16, 4, 4096, 8, 0),
        (4, 2, 2, 8, 512, 2, 0),
        (16, 1, 4, 4, 512, 4, 0),
        (16, 1, 4, 4, 512, 4, 1),
        (4, 2, 2, 8, 512, 2, 1),
        (8, 2, 2, 4, 256, 2, 1),
    ]
    for trans_a in (0, 1):
        params = [
            dict(MR=mr, WARPS=w, WK=wk, KT=kt, KCHUNK=kc, UNROLL=u, AK=ak, STREAM=1, TRANS_A=trans_a)
            for mr, w, wk, kt, kc, u, ak in points
        ]
        _each_reduction_right(gpu_evaluator, "fewrows", params, Problem(*shape, layout="tn" if trans_a else "nn"))


@pytest.mark.parametrize("shape", [(4097, 1, 3001), (1001, 3, 777), (333, 16, 5000), (130, 17, 4099), (6, 3, 2)])
def test_fewcols_warps_along_k_correct(gpu_evaluator, shape):
    """fewcols with WK warps of a block along K, their sums met in shared memory, in both lane
    layouts (LANE_ROWS): M not a whole number of blocks' rows, N of 1-17 columns (several column
    groups, N % 4 != 0), K not a whole number of chunks or steps (and K % 4 != 0: A's rows
    unaligned, the scalar loads), B in either layout, one chunk (no split) and several (atomics
    or the last block), against FP64."""
    points = [
        (1, 4, 2, 8, 4096, 2, 0),
        (4, 2, 2, 4, 512, 1, 0),  # UNROLL 2 spills under TRANS_B + last_block: the filter rejects it
        (16, 2, 1, 2, 256, 4, 0),
        (16, 2, 2, 4, 256, 2, 1),
        (8, 2, 2, 4, 512, 2, 1),
        (8, 1, 1, 8, 256, 4, 1),
    ]
    _fewcols_points_right(gpu_evaluator, shape, points, "LANE_ROWS")


@pytest.mark.parametrize(
    "shape", [(4097, 16, 3001), (1001, 3, 777), (333, 16, 5000), (130, 17, 4099), (6, 3, 2), (4096, 32, 4096)]
)
def test_fewcols_staged_a_correct(gpu_evaluator, shape):
    """fewcols with A's rows through a ring of shared memory (A_STAGES, cp.async): M not a whole
    number of blocks (rows past M zero-filled), K not a whole number of chunks or of stages (k past
    the chunk zero-filled), K % 8 != 0 (such a chunk takes the unstaged loads), N of 3-32 columns
    (N % 4 != 0 too), B in either layout, both reductions, against FP64."""
    points = [(16, 2, 2, 4, 512, 1, 3), (32, 1, 2, 4, 256, 1, 4), (4, 4, 1, 2, 1024, 1, 3), (8, 2, 4, 2, 256, 1, 3)]
    _fewcols_points_right(gpu_evaluator, shape, points, "A_STAGES", LANE_ROWS=1)


@pytest.mark.parametrize(
    "shape", [(4097, 16, 3001), (1001, 3, 777), (333, 16, 5000), (130, 17, 4099), (6, 3, 2), (4096, 32, 4096)]
)
def test_fewcols_b_through_the_ring_correct(gpu_evaluator, shape):
    """fewcols with B's rows through A's ring (B_RING): a chunk of all of K (one launch) and
    several (both reductions), M not a whole number of blocks, K not a whole number of stages,
    K % 4 != 0 (A copied 4 bytes at a time), N % 4 != 0 and B stored N x K (B copied 4 bytes at a
    time), N of 3-32 columns against blocks of 4-32, against FP64."""
    points = [
        (16, 1, 2, 4, 16384, 1, 3),
        (16, 1, 1, 8, 8192, 2, 4),
        (8, 1, 2, 4, 1024, 1, 4),
        (32, 2, 1, 4, 4096, 1, 2),
        (4, 2, 2, 2, 256, 2, 3),
    ]
    _fewcols_points_right(gpu_evaluator, shape, points, "A_STAGES", LANE_ROWS=1, B_RING=1)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("shape", [(33, 17, 700), (5, 130, 257), (100, 96, 4), (1, 1, 1)])
def test_tiny_correct(gpu_evaluator, shape, layout):
    """tiny with one group along K and with several (their sums met in shared memory), K deeper
    than a chunk (several chunks, the last one partial) and shallower, tiles partly outside M and
    N, in each layout, against FP64."""
    points = [
        {"BM": 16, "BN": 16, "TM": 1, "TN": 1, "KS": 1, "KC": 32},
        {"BM": 8, "BN": 16, "TM": 1, "TN": 2, "KS": 8, "KC": 128},
        {"BM": 32, "BN": 8, "TM": 4, "TN": 1, "KS": 4, "KC": 64},
        {"BM": 4, "BN": 8, "TM": 1, "TN": 1, "KS": 16, "KC": 256},
    ]
    trans = {"TRANS_A": int(layout[0] == "t"), "TRANS_B": int(layout[1] == "t")}
    configs = [Config.make("tiny", p | trans) for p in points]
    _all_right(gpu_evaluator, configs, Problem(*shape, layout=layout))


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize(
    "shape", [(20011, 33, 7), (130, 257, 100), (77, 300, 16), (4099, 520, 24), (5, 4097, 1), (1, 1, 1)]
)
def test_panel_correct(gpu_evaluator, shape, layout):
    """panel with all of K in one panel (the next tile's A prefetched; blocks walking several
    tiles down M at 20011 rows) and K deeper than the panel (chunks, the last one partial), K
    equal to it, tiles partly outside M and N, in each layout, C stored from registers and by the
    copy engine (ST=1: rows of 16-byte multiples where N % 4 == 0, else from registers), against FP64."""
    points = [
        {"BM": 32, "BN": 128, "TM": 4, "TN": 4, "KC": 32},
        {"BM": 8, "BN": 32, "TM": 1, "TN": 1, "KC": 8},
        {"BM": 16, "BN": 256, "TM": 2, "TN": 8, "KC": 32},
        {"BM": 64, "BN": 64, "TM": 8, "TN": 2, "KC": 32, "CS": 1},
    ]
    # ST=1 on tiles ptxas builds without spills in every layout: the first and third spill 8-32
    # bytes reading B^T, which the search's filter rejects (its space has them in nn, tn and tt).
    staged = [points[1], points[3], {"BM": 16, "BN": 256, "TM": 8, "TN": 8, "KC": 16}]
    trans = {"TRANS_A": int(layout[0] == "t"), "TRANS_B": int(layout[1] == "t")}
    configs = [Config.make("panel", p | trans | {"ST": 0}) for p in points]
    configs += [Config.make("panel", p | trans | {"ST": 1}) for p in staged]
    _all_right(gpu_evaluator, configs, Problem(*shape, layout=layout))


@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize(
    "shape", [(4099, 8, 4096), (37, 16, 777), (1000, 13, 2050), (5, 40, 5000), (130, 3, 3), (1, 1, 1)]
)
def test_colstream_correct(gpu_evaluator, shape, layout):
    """colstream with one block along K and several (atomics into C scaled by beta), K not a whole
    number of stages or of four (A's 4-byte path), rows past M in a block, N % 4 != 0 and more
    columns than a block holds (several groups), B stored K x N and N x K, against FP64."""
    points = [
        {"NR": 8, "RPW": 4, "WARPS": 8, "S": 2, "STAGES": 3, "KSPLIT": 1},
        {"NR": 16, "RPW": 4, "WARPS": 8, "S": 2, "STAGES": 3, "KSPLIT": 1},
        {"NR": 4, "RPW": 2, "WARPS": 4, "S": 1, "STAGES": 2, "KSPLIT": 4},
        {"NR": 8, "RPW": 1, "WARPS": 2, "S": 4, "STAGES": 4, "KSPLIT": 2},
        {"NR": 32, "RPW": 2, "WARPS": 4, "S": 1, "STAGES": 3, "KSPLIT": 3},
    ]
    configs = [Config.make("colstream", p | {"TRANS_B": int(layout[1] == "t")}) for p in points]
    _all_right(gpu_evaluator, configs, Problem(*shape, layout=layout))


@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize(
    "shape", [(4099, 8, 4096), (37, 16, 777), (1000, 13, 2050), (5, 40, 5000), (130, 3, 3), (1, 1, 1)]
)
def test_colstage_correct(gpu_evaluator, shape, layout):
    """colstage with one block along K and several (atomics into C scaled by beta), K not a whole
    number of stages or of four (A's 4-byte copies), rows past M in a block, N % 4 != 0 and more
    columns than a block holds (several groups), every split of a warp's lanes between rows and K
    (1-16 lanes along K), more 16-byte pieces in a row of A than threads in the block, the stages
    in each block's own order (ROT), B stored K x N and N x K, against FP64."""
    points = [
        {"NR": 16, "KL": 4, "RPW": 4, "WARPS": 16, "KSTAGE": 256, "STAGES": 3, "KSPLIT": 1},
        {"NR": 8, "KL": 1, "RPW": 1, "WARPS": 4, "KSTAGE": 128, "STAGES": 2, "KSPLIT": 2, "ROT": 1, "PIN": 1},
        {"NR": 4, "KL": 2, "RPW": 2, "WARPS": 2, "KSTAGE": 512, "STAGES": 2, "KSPLIT": 4},
        {"NR": 16, "KL": 8, "RPW": 4, "WARPS": 8, "KSTAGE": 256, "STAGES": 4, "KSPLIT": 1},
        {"NR": 32, "KL": 16, "RPW": 2, "WARPS": 4, "KSTAGE": 256, "STAGES": 3, "KSPLIT": 3, "ROT": 1, "PIN": 1},
    ]
    configs = [Config.make("colstage", p | {"TRANS_B": int(layout[1] == "t")}) for p in points]
    _all_right(gpu_evaluator, configs, Problem(*shape, layout=layout))


def _fewcols_points_right(gpu_evaluator, shape: tuple, points: list[tuple], last: str, **fixed) -> None:
    """fewcols at `points` (NR, RPW, WARPS, WK, KCHUNK, UNROLL and `last`), each with `fixed` and
    STREAM 1, with B stored K x N and N x K, every reduction right at `shape`."""
    keys = ("NR", "RPW", "WARPS", "WK", "KCHUNK", "UNROLL", last)
    for trans_b in (0, 1):
        params = [dict(zip(keys, p, strict=True)) | fixed | {"STREAM": 1, "TRANS_B": trans_b} for p in points]
        _each_reduction_right(gpu_evaluator, "fewcols", params, Problem(*shape, layout="nt" if trans_b else "nn"))


def _each_reduction_right(gpu_evaluator, family: str, params: list[dict], problem: Problem) -> None:
    """Each of `params` with every reduction of a split K the family declares runs (none rejected)
    and matches FP64. The runner verifies two launches in a row, so a reduction that leaves its
    workspace (the last block's counters) dirty for the next launch fails here too."""
    reductions = Family.load(family).params["REDUCE"].choices
    assert {"atomic", "last_block"} <= set(reductions)
    _all_right(gpu_evaluator, [Config.make(family, p | {"REDUCE": red}) for p in params for red in reductions], problem)


def _all_right(gpu_evaluator, configs: list[Config], problem: Problem) -> None:
    """Every one of `configs` runs at `problem` (none rejected) and matches FP64."""
    ms = gpu_evaluator.evaluate(configs, problem, verify_only=True)
    bad = [f"{m.config.name}: {m.status.value} {m.message}" for m in ms if m.status is not Status.OK]
    assert not bad and len(ms) == len(configs), "\n".join(bad)
    assert all(m.error < 1e-5 for m in ms), max(m.error for m in ms)
