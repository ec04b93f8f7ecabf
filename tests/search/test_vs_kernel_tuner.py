"""benchmarks/vs_kernel_tuner.py: what Kernel Tuner is told about a family is what autotune runs.

Kernel Tuner launches one kernel with the grid, block and dynamic shared memory it is given;
the comparison derives these from the family's own launch plan. These checks need no GPU and
no Kernel Tuner."""

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import vs_kernel_tuner as vkt  # noqa: E402 - after the sys.path line that finds benchmarks/

from autotune.core.types import Config, Problem  # noqa: E402
from autotune.kernels.limits import load_profile  # noqa: E402

LIMITS = load_profile("h100")


# warptile's space is the large one: its restriction under -m slow.
@pytest.mark.parametrize("family", ["vectorized", pytest.param("warptile", marks=pytest.mark.slow)])
def test_the_restriction_is_exactly_the_valid_space(family):
    space, _ = vkt.compared_space(family)
    fam = space.family
    valid = space.enumerate(LIMITS).valid
    params, restrict = vkt.kt_space(fam, space, LIMITS)
    rng = random.Random(1)
    for cfg in rng.sample(valid, min(300, len(valid))):
        p = cfg.as_dict() | {"THREADS": fam.derive(cfg.as_dict())["THREADS"]}
        assert restrict(p)
        assert not restrict(p | {"THREADS": p["THREADS"] * 2})  # the block size must be the family's
    valid_names = {c.name for c in valid}
    tried = 0
    while tried < 300:  # random combinations of the value lists: allowed exactly when valid
        p = {k: rng.choice(v) for k, v in params.items() if k != "THREADS"}
        name = Config.make(fam.name, p).name
        threads = fam.derive(p)["THREADS"]
        assert restrict(p | {"THREADS": threads}) == (name in valid_names)
        tried += 1


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 1000, 1000), (777, 777, 777)])
def test_warptile_part_is_one_launch_with_the_runners_grid(shape):
    """The pinned part of warptile (data_parallel, no split-K) is one kernel at any shape whose
    B needs no packing, and its grid and shared memory are the launch plan's."""
    space, known = vkt.compared_space("warptile")
    assert space.values["SCHEDULE"] == ["data_parallel"] and space.values["SPLITK"] == [1]
    assert known and not space.seeds  # seeds only join the optimum's candidates: both tools start cold
    problem = Problem(*shape)
    fam = space.family
    one = vkt.OneLaunch(fam, problem, LIMITS)
    valid = space.enumerate(LIMITS).valid
    for cfg in random.Random(2).sample(valid, 200):
        plan = fam.resolve(cfg.as_dict()).plan
        geo = plan.geometry(*shape, slots=LIMITS.sm_count)
        env = fam.derive(cfg.as_dict())
        assert one.grid(cfg.as_dict()) == geo.grid
        assert one.smem(cfg.as_dict()) == env["SMEM_BYTES"]
        tiles = -(-shape[0] // env["BM"]) * -(-shape[1] // env["BN"])
        assert geo.grid == (tiles, 1, 1)
        # N % 4 != 0 packs B first (a helper kernel and a workspace): not one launch.
        assert one.launchable(cfg.as_dict()) == (shape[1] % 4 == 0)


def test_a_split_schedule_is_not_one_launch():
    space, _ = vkt.compared_space("warptile")
    fam = space.family
    one = vkt.OneLaunch(fam, Problem(4096, 4096, 4096), LIMITS)
    base = space.enumerate(LIMITS).valid[0].as_dict()
    checked = 0
    for schedule, splitk in (("split_launch", 1), ("stream_k", 1), ("data_parallel", 4)):
        cfg = base | {"SCHEDULE": schedule, "SPLITK": splitk}
        if fam.violations(Config.make(fam.name, cfg), LIMITS):
            continue
        assert not one.launchable(cfg), (schedule, splitk)
        checked += 1
    assert checked == 3
