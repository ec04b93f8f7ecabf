"""The fallback config (a shape with no tuned result) fits every GPU profile it can be picked for."""

import pytest
from helpers import families

from autotune.core.types import Problem
from autotune.dispatch.api import fallback_config
from autotune.kernels.limits import available_profiles, load_profile
from autotune.kernels.space import Space
from autotune.search.evaluate import prepare


@pytest.mark.parametrize("profile", available_profiles())
def test_the_fallback_for_each_profile_passes_its_filter_and_compiles(profile):
    limits = load_profile(profile)
    cfg = fallback_config(limits.arch)
    (prep,) = prepare([cfg], Problem(64, 64, 64), limits, limits.arch, {})
    assert prep.measurement is None, prep.measurement  # static rules, compile, registers, spills
    assert prep.spec["resources"]["smem_bytes"] <= limits.smem_per_block_optin


@pytest.mark.parametrize("family", families())
def test_every_family_names_a_valid_fallback(family, h100):
    sp = Space.load(family)
    assert sp.fallback is not None and not sp.family.violations(sp.fallback, h100)
