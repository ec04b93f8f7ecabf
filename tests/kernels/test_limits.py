"""Device profiles (autotune/profiles/, read by autotune/kernels/limits.py): every field given and
of its type, threads and blocks an SM among them; a record's limits checked the same way."""

import pytest

from autotune.core.types import UserError
from autotune.kernels import limits
from autotune.kernels.limits import DeviceLimits, available_profiles, load_profile, resident_per_sm
from autotune.records import fields

# Threads and blocks an SM holds, by compute capability (CUDA C++ Programming Guide, its table of
# features and technical specifications).
PER_SM = {"sm_75": (1024, 16), "sm_80": (2048, 32), "sm_86": (1536, 16), "sm_89": (1536, 24), "sm_90": (2048, 32)}


@pytest.mark.parametrize("name", available_profiles())
def test_each_profile_gives_its_architectures_threads_and_blocks_an_sm(name):
    prof = load_profile(name)
    assert (prof.threads_per_sm, prof.blocks_per_sm) == PER_SM[prof.arch]
    assert prof.max_threads_per_block <= prof.threads_per_sm


def _profile(tmp_path, monkeypatch, text):
    monkeypatch.setattr(limits, "PROFILE_DIR", tmp_path)
    (tmp_path / "mine.yaml").write_text(text)
    return lambda: load_profile("mine")


H100_TEXT = (limits.PROFILE_DIR / "h100.yaml").read_text()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("blocks_per_sm: 32\n", "", r"mine\.yaml: the profile has no 'blocks_per_sm'"),
        ("threads_per_sm: 2048", "threads_per_sm: 2048.5", r"mine\.yaml:14: threads_per_sm is 2048\.5, not a positive"),
        ("blocks_per_sm: 32", "blocks_per_sm: 0", r"mine\.yaml:15: blocks_per_sm is 0, not a positive integer"),
        ("sm_count: 132", "sm_count: true", r"mine\.yaml:4: sm_count is True, not a positive integer"),
        ("blocks_per_sm: 32\n", "blocks_per_sm: 32\nwarps: 2\n", r"mine\.yaml:16: unknown key 'warps'"),
        ("arch: sm_90", "arch: 90", r"mine\.yaml:3: arch is 90, not a text"),
        (H100_TEXT, "[1, 2]\n", r"mine\.yaml: a device profile must be a mapping"),
    ],
)
def test_a_profile_that_is_wrong_is_one_line_naming_the_file(tmp_path, monkeypatch, old, new, message):
    assert old in H100_TEXT
    load = _profile(tmp_path, monkeypatch, H100_TEXT.replace(old, new))
    with pytest.raises(UserError, match=message):
        load()


def test_a_profile_as_shipped_loads_from_anywhere(tmp_path, monkeypatch):
    shipped = load_profile("h100")
    assert _profile(tmp_path, monkeypatch, H100_TEXT)() == shipped


def test_a_record_stored_before_threads_and_blocks_an_sm_were_kept_has_the_h100s():
    """Every record stored before these fields was measured on an H100 or H200."""
    a10 = load_profile("a10").to_dict()
    assert resident_per_sm(a10) == (1536, 16)
    old = {k: v for k, v in a10.items() if k not in ("threads_per_sm", "blocks_per_sm")}
    assert resident_per_sm(old) == (DeviceLimits.threads_per_sm, DeviceLimits.blocks_per_sm) == (2048, 32)
    assert DeviceLimits(**old).threads_per_sm == 2048


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"threads_per_sm": 0}, "limits.threads_per_sm is 0, not an integer from 1"),
        ({"blocks_per_sm": "16"}, "limits.blocks_per_sm is '16', not an integer from 1"),
        ({"threads_per_sm": 512}, "limits.max_threads_per_block 1024 is more than limits.threads_per_sm 512"),
    ],
)
def test_a_records_threads_and_blocks_an_sm_are_checked(change, message):
    prof = load_profile("a10")
    gpu = {"name": prof.name, "arch": prof.arch}
    fields.check_limits("tiled", {"limits": prof.to_dict()}, gpu)
    old = {k: v for k, v in prof.to_dict().items() if k not in ("threads_per_sm", "blocks_per_sm")}
    fields.check_limits("tiled", {"limits": old}, gpu)  # stored before they were kept
    with pytest.raises(fields.Corrupt, match=message):
        fields.check_limits("tiled", {"limits": {**prof.to_dict(), **change}}, gpu)
