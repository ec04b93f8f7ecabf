import itertools
import random

import jinja2
import pytest

from autotune.limits import DeviceLimits
from autotune.render import render
from autotune.space import Family, Space, known_families
from autotune.types import Config, UserError

FAMILIES = ["tiled", "coarse1d", "coarse2d", "vectorized", "warptile"]


def test_known_families():
    assert set(FAMILIES) <= set(known_families())


@pytest.mark.parametrize("family", FAMILIES)
def test_renders_sampled_valid_configs(family, h100):
    sp = Space.load(family)
    valid = sp.enumerate(h100).valid
    assert valid
    fam = sp.family
    for cfg in random.Random(0).sample(valid, min(12, len(valid))) + sp.seeds:
        src = render(fam, cfg, kernel_name="k_test")
        assert "{{" not in src and "{%" not in src
        assert 'extern "C" __global__' in src and "k_test(" in src and "k_test_scale_c(" in src
        # every parameter value reaches the source as a literal somewhere
        assert str(cfg.as_dict()[next(iter(fam.params))]) in src


def test_strict_undefined_fails_on_a_misspelled_parameter(tmp_path):
    (tmp_path / "_common.cuh.j2").write_text("")
    (tmp_path / "bad.cu.j2").write_text(
        "{#- autotune\nparams: {X: {domain: [1, 8]}}\nderived: {THREADS: 32 * X, SMEM_BYTES: 0}\n"
        "launch: {grid: ['1', '1', '1']}\n-#}\nint a = {{ Y }};\n")
    fam = Family.load("bad", tmp_path)
    with pytest.raises(jinja2.UndefinedError):
        render(fam, Config.make("bad", {"X": 1}))


def test_declared_values_match_hand_computation(h100):
    fam = Family.load("coarse2d")
    env = fam.derive({"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4})
    assert env["THREADS"] == (128 // 8) * (64 // 4) == 256
    assert env["SMEM_BYTES"] == 4 * (128 * 16 + 16 * 64) == 12288
    w = Family.load("warptile")
    p = dict(BM=128, BN=256, BK=16, WARPS_M=2, WARPS_N=4, LANES_N=8, TM=8, TN=4, STAGES=3, PAD_A=4, PAD_B=0,
             GROUP_M=8, SPLITK=1, MINB=1, PREFETCH=0, MMA_ORDER=0)
    env = w.derive(p)
    assert (env["THREADS"], env["WM"], env["WN"], env["WMITER"], env["WNITER"]) == (256, 64, 64, 2, 2)
    assert env["SMEM_BYTES"] == 4 * 3 * 16 * (132 + 256) == 74496
    geo = w.launch_geometry(Config.make("warptile", p), 4097, 1000, 5)
    assert geo == {"grid": (33 * 4, 1, 1), "block": 256, "dynamic_smem": 74496, "scale_c_first": False,
                   "workspace_bytes": 0, "workspace_zeroed": 0, "pack_b": False, "pack_b_at": 0,
                   "tail_tiles": 0, "tail_first": 0, "tail_grid": 0}


def test_b_is_packed_to_a_16_byte_pitch_only_when_its_rows_are_unaligned():
    w = Family.load("warptile")
    p = dict(Space.load("warptile").seeds[0].as_dict())
    geo = w.launch_geometry(Config.make("warptile", p), 300, 4097, 70)
    assert geo["pack_b"] and geo["pack_b_at"] == 0 and geo["workspace_bytes"] == 4 * 70 * 4100
    assert not w.launch_geometry(Config.make("warptile", p), 300, 4096, 70)["pack_b"]
    assert not w.launch_geometry(Config.make("warptile", {**p, "PACKB": 0}), 300, 4097, 70)["pack_b"]
    # With stream-K the packed B follows the flags and partial tiles.
    sk = w.launch_geometry(Config.make("warptile", {**p, "STREAMK": 1}), 300, 4097, 70, slots=132)
    assert sk["pack_b_at"] == 16 * 33 + 4 * 132 * 128 * 256
    assert sk["workspace_bytes"] == sk["pack_b_at"] + 4 * 70 * 4100


def test_stream_k_launch_reads_the_device_slots():
    w = Family.load("warptile")
    p = dict(BM=128, BN=256, BK=16, WARPS_M=2, WARPS_N=4, LANES_N=8, TM=8, TN=4, STAGES=3, PAD_A=4, PAD_B=0,
             GROUP_M=8, SPLITK=1, MINB=1, PREFETCH=0, MMA_ORDER=0, STREAMK=1)
    plan = w.launch_plan(Config.make("warptile", p))
    assert plan.needs_slots
    with pytest.raises(ValueError, match="SLOTS"):
        plan.geometry(4096, 4096, 4096)
    # 512 tiles on 132 slots: a persistent grid of 132 blocks, one flag and one partial tile each.
    geo = plan.geometry(4096, 4096, 4096, slots=132)
    assert geo["grid"] == (132, 1, 1) and not geo["scale_c_first"]
    assert geo["workspace_bytes"] == 16 * 33 + 4 * 132 * 128 * 256 and geo["workspace_zeroed"] == 16 * 33
    # Fewer k-iterations than slots (1 tile, K = 20: 2 iterations): no idle blocks.
    assert plan.geometry(5, 7, 20, slots=132)["grid"] == (2, 1, 1)
    # Without stream-K the same family needs no slots and no workspace.
    plain = w.launch_plan(Config.make("warptile", {**p, "STREAMK": 0}))
    assert not plain.needs_slots and plain.geometry(4096, 4096, 4096)["workspace_bytes"] == 0


def test_split_launch_gives_the_tail_what_whole_waves_leave():
    w = Family.load("warptile")
    p = dict(Space.load("warptile").seeds[0].as_dict(), STREAMK=2)  # 128 x 256 tiles, BK 16
    plan = w.launch_plan(Config.make("warptile", p))
    assert plan.needs_slots and plan.has_tail  # its module holds the tail kernel
    assert not any(w.launch_plan(Config.make("warptile", {**p, "STREAMK": sk})).has_tail for sk in (0, 1))

    def split(M, N, K, slots=132):
        g = plan.geometry(M, N, K, slots=slots)
        assert g["grid"][0] + g["tail_tiles"] == -(-M // 128) * -(-N // 256)
        assert g["tail_first"] == (g["grid"][0] if g["tail_tiles"] else 0) and g["workspace_bytes"] == (0 if N % 4 == 0 else 4 * K * 4 * -(-N // 4))
        return g["grid"][0], g["tail_tiles"], g["tail_grid"]

    # 512 tiles: 3 whole waves of 132, the 116 left (more than half a wave) over 132 blocks.
    assert split(4096, 4096, 4096) == (396, 116, 132)
    # 2048 tiles: 15 waves, 68 left (more than half).
    assert split(8192, 8192, 8192) == (1980, 68, 132)
    # 288 tiles: 2 waves and 24 left (less than half): one wave more goes to the tail.
    assert split(3000, 3000, 3000) == (132, 156, 132)
    # Fewer tiles than slots: all in the tail; whole waves exactly: no tail.
    assert split(1024, 1024, 1024) == (0, 32, 132) and split(4096, 1024, 4096) == (0, 128, 132)
    assert split(128 * 12, 256 * 11, 64) == (132, 0, 0)
    # Fewer k-iterations than slots: one block per iteration.
    assert split(5, 7, 20) == (0, 1, 2)
    # A split launch without a tail needs nothing beyond the main kernel; whole tiles have no tail.
    plain = w.launch_plan(Config.make("warptile", {**p, "STREAMK": 0}))
    assert not plain.needs_slots and plain.geometry(4096, 4096, 4096)["tail_tiles"] == 0


def test_split_launch_in_one_kernel_is_a_persistent_grid_with_two_zeroed_counters():
    w = Family.load("warptile")
    p = dict(Space.load("warptile").seeds[0].as_dict(), STREAMK=3)  # 128 x 256 tiles, BK 16
    plan = w.launch_plan(Config.make("warptile", p))
    assert plan.needs_slots and not plan.has_tail  # one kernel: no tail kernel in its module
    geo = plan.geometry(4096, 4096, 4096, slots=132)
    assert geo["grid"] == (132, 1, 1) and not geo["tail_tiles"] and not geo["scale_c_first"]
    assert geo["workspace_bytes"] == 16 and geo["workspace_zeroed"] == 16
    # Fewer k-iterations than slots (1 tile, K = 20: 2 iterations): no idle blocks.
    assert plan.geometry(5, 7, 20, slots=132)["grid"] == (2, 1, 1)
    # Packed B follows the counters.
    packed = plan.geometry(300, 4097, 70, slots=132)
    assert packed["pack_b"] and packed["pack_b_at"] == 16 and packed["workspace_bytes"] == 16 + 4 * 70 * 4100


def test_split_launch_in_one_launch_puts_a_row_of_tail_blocks_before_the_whole_waves():
    w = Family.load("warptile")
    p = dict(Space.load("warptile").seeds[0].as_dict(), STREAMK=4)  # 128 x 256 tiles, BK 16
    plan = w.launch_plan(Config.make("warptile", p))
    assert plan.needs_slots and not plan.has_tail

    def grid(M, N, K, slots=132):
        g = plan.geometry(M, N, K, slots=slots)
        assert not g["tail_tiles"] and g["workspace_zeroed"] == 16 and g["grid"][2] == 1
        return g["grid"][:2]

    # The tail rows follow the split launch's rule (test_split_launch_gives_the_tail_...).
    assert grid(4096, 4096, 4096) == (132, 1 + 3) and grid(8192, 8192, 8192) == (132, 1 + 15)
    assert grid(3000, 3000, 3000) == (132, 1 + 1) and grid(1024, 1024, 1024) == (132, 1)
    assert grid(128 * 12, 256 * 11, 64) == (132, 1 + 1)  # whole waves exactly: an empty tail row
    assert grid(5, 7, 20) == (132, 1) and grid(4096, 4096, 4096, slots=264) == (264, 1 + 1)


def test_the_space_seeds_stream_k_with_packed_b(h100):
    # tests/gpu/test_streamk.py runs over these seeds: without any, it would collect no case.
    sp = Space.load("warptile")
    sk = [c for c in sp.seeds if c.as_dict().get("STREAMK") == 1]
    assert len(sk) >= 2 and all(c.as_dict().get("PACKB", 1) == 1 for c in sk)
    assert sp.values["STREAMK"] == [0, 1, 2, 3, 4]
    assert all(not sp.family.violations(c, h100) for c in sk)


def test_stream_k_excludes_split_k(h100):
    w = Family.load("warptile")
    p = dict(Space.load("warptile").seeds[0].as_dict(), STREAMK=1, SPLITK=2)
    assert any("stream-K already splits K" in r for r in w.violations(Config.make("warptile", p), h100))


def test_a_parameter_added_later_takes_its_default_in_stored_configs_and_spaces(tmp_path):
    w = Family.load("warptile")
    old = {k: v for k, v in Space.load("warptile").seeds[0].as_dict().items() if k != "STREAMK"}
    assert w.validate_params(old, "stored")["STREAMK"] == 0
    render(w, Config.make("warptile", old))  # a result stored before STREAMK existed still renders
    f = tmp_path / "old.yaml"
    f.write_text("space:\n" + "".join(f"  {k}: [{v}]\n" for k, v in old.items()))
    assert Space.load("warptile", f).values["STREAMK"] == [0]
    no_default = {k: v for k, v in old.items() if k != "MINB"}
    with pytest.raises(UserError, match="missing parameter 'MINB'"):
        w.validate_params(no_default, "stored")


def test_violations_carry_reasons(h100):
    fam = Family.load("coarse2d")
    bad = fam.violations(Config.make("coarse2d", {"BM": 256, "BN": 256, "BK": 64, "TM": 2, "TN": 2}), h100)
    assert any("threads 16384 > 1024" in r for r in bad)
    assert any("smem_bytes 131072 > 49152" in r for r in bad)
    bad = fam.violations(Config.make("coarse2d", {"BM": 64, "BN": 64, "BK": 8, "TM": 3, "TN": 4}), h100)
    assert any("BM % TM == 0" in r and "TM=3" in r for r in bad)
    tight = DeviceLimits(name="tiny", arch="sm_90", sm_count=1, max_threads_per_block=128)
    ok = Config.make("coarse2d", {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4})
    assert fam.violations(ok, h100) == []
    assert fam.violations(ok, tight) == ["threads 256 > 128 per block"]


@pytest.mark.parametrize("family", ["tiled", "coarse1d", "coarse2d", "vectorized"])
def test_enumeration_equals_brute_force(family, h100):
    sp = Space.load(family)
    en = sp.enumerate(h100)
    brute = set()
    for values in itertools.product(*sp.values.values()):
        cfg = Config.make(family, dict(zip(sp.values, values)))
        if not sp.family.violations(cfg, h100):
            brute.add(cfg)
    assert set(en.valid) == brute
    assert sum(en.rejected.values()) == en.total - len(en.valid)


def test_enumeration_equals_brute_force_warptile_slice(h100):
    sp = Space.load("warptile")
    small = dict(sp.values, BK=[8, 32], STAGES=[2, 4], SPLITK=[1, 4], PREFETCH=[0], MMA_ORDER=[0])
    sp = Space(sp.family, small, [], "slice")
    en = sp.enumerate(h100)
    brute = {c for c in (Config.make("warptile", dict(zip(small, v))) for v in itertools.product(*small.values()))
             if not sp.family.violations(c, h100)}
    assert set(en.valid) == brute and len(brute) > 50


def test_empty_space_names_the_constraints(h100):
    fam = Family.load("coarse2d")
    sp = Space.from_dict(fam, {"space": {"BM": [256], "BN": [256], "BK": [64], "TM": [1, 2], "TN": [1]}}, "x.yaml")
    en = sp.enumerate(h100)
    assert en.valid == []
    msg = sp.describe_empty(en)
    # BK fixes the shared memory (4 * 64 * 512 B) before TM is chosen: that rule cuts both.
    assert msg == "family coarse2d: no valid point among 2 (x.yaml); 'shared memory <= device limit' removed 2"


@pytest.mark.parametrize("doc, fragment", [
    ("space: {BM: [64], BN: [64], BK: [8], TM: [4], TN: [4], XX: [1]}", "unknown parameter 'XX'"),
    ("space: {BM: [64], BN: [64], BK: [8], TM: [4]}", "missing parameter 'TN'"),
    ("space: {BM: [64.5], BN: [64], BK: [8], TM: [4], TN: [4]}", "BM must be an integer"),
    ("space: {BM: ['128; asm(\"trap;\")'], BN: [64], BK: [8], TM: [4], TN: [4]}", "BM must be an integer"),
    ("space: {BM: [0], BN: [64], BK: [8], TM: [4], TN: [4]}", "outside its domain"),
    ("space: {BM: [true], BN: [64], BK: [8], TM: [4], TN: [4]}", "BM must be an integer"),
    ("space: {BM: [], BN: [64], BK: [8], TM: [4], TN: [4]}", "BM has no values"),
    ("[1, 2]", "expected a mapping"),
    ("family: tiled\nspace: {TILE: [8]}", "is for family 'tiled'"),
    ("space: {BM: [64], BN: [64], BK: [8], TM: [4], TN: [4]}\nseeds: [{BM: 64}]", "missing parameter"),
    ("space: {BM: [64], BN: [64], BK: [8], TM: [4], TN: [4]}\nbogus: 1", "unknown key 'bogus'"),
])
def test_config_loader_rejects_bad_input(tmp_path, doc, fragment):
    path = tmp_path / "space.yaml"
    path.write_text(doc)
    with pytest.raises(UserError) as exc:
        Space.load("coarse2d", path)
    assert fragment in str(exc.value) and str(path) in str(exc.value)


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("space:\n  BM: [64\n  BN: [1]\n")
    with pytest.raises(UserError) as exc:
        Space.load("coarse2d", path)
    assert "malformed YAML" in str(exc.value) and "line" in str(exc.value)


def test_yaml_tags_are_not_executed(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("space: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(UserError):
        Space.load("coarse2d", path)


def test_default_configs_are_valid_yaml_with_valid_seeds(h100):
    for fam in FAMILIES:
        sp = Space.load(fam)
        valid = set(sp.enumerate(h100).valid)
        assert sp.seeds and all(s in valid for s in sp.seeds), fam
