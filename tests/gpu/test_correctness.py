"""On the GPU: every family correct at awkward shapes, verified against cuBLAS (FP64 reference)."""

import random

import pytest
from helpers import families, tier_of

from autotune.space import Space
from autotune.types import Config, Problem, Status

pytestmark = pytest.mark.gpu

# Tails in every dimension, primes, non-multiples of 4 and of every tile, skinny and deep-K.
SHAPES = [
    (1, 1, 1),
    (7, 13, 5),
    (31, 17, 3),
    (127, 129, 131),
    (1000, 1000, 1000),
    (1, 4096, 64),
    (4096, 1, 64),
    (3, 5, 8191),
    (64, 64, 8192),
    (1023, 1021, 257),
    (257, 1025, 33),
    (96, 100, 4),
    (2500, 4100, 100),  # stream-K: more tiles than two waves, split tiles first, then whole ones
]

# The strict-FP32 families (the tensor-core tiers have their contracts: test_tiers_gpu.py).
FAMILIES = [f for f in families() if tier_of(f) == "highest"]


def _configs() -> list[Config]:
    """Each family's seeds plus a few random valid points (fixed seed), and warptile's
    split-K, pipeline-depth and padding variants."""
    from autotune.limits import load_profile

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
        {"PAD_A": 0, "PAD_B": 4, "GROUP_M": 1},
        {"BK": 32, "LANES_N": 8},
        {"PREFETCH": 0},
        {"PREFETCH": 0, "SPLITK": 2, "MINB": 1, "STAGES": 2},
        *(
            {"SCHEDULE": s, **v}
            for s in ("split_launch", "split_persistent", "split_fused")
            for v in ({}, {"PACKB": 0}, {"GROUP_M": 1, "BK": 8})
        ),
    ):
        out.append(Config.make("warptile", {**base, **variant}))
    return list(dict.fromkeys(out))


CONFIGS = _configs()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_all_families_correct(gpu_evaluator, shape):
    problem = Problem(*shape)
    ms = gpu_evaluator.evaluate(CONFIGS, problem, verify_only=True)
    ran = [m for m in ms if m.status is not Status.REJECTED]
    assert {m.config.family for m in ran} == set(FAMILIES)
    bad = [f"{m.config.name}: {m.status.value} {m.message}" for m in ran if m.status is not Status.OK]
    assert not bad, "\n".join(bad)
    assert all(m.error < 1e-5 for m in ran), max(m.error for m in ran)
