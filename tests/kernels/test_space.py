import collections
import dataclasses
import itertools
import math
import random

import pytest
from helpers import ROOT, families

from autotune.core.types import Config, Problem, UserError
from autotune.kernels.counts import count_key
from autotune.kernels.family import Family, known_families
from autotune.kernels.limits import DeviceLimits, profile_for_arch
from autotune.kernels.render import render
from autotune.kernels.space import Space

FAMILIES = families()


def test_every_template_has_a_default_space():
    # A family template without configs/<name>.yaml would get none of the tests below.
    assert len(FAMILIES) >= 5 and FAMILIES == known_families()


@pytest.mark.parametrize("family", FAMILIES)
def test_renders_sampled_valid_configs(family, h100):
    sp = Space.load(family)
    valid = sp.enumerate(h100).valid
    assert valid
    fam = sp.family
    for cfg in random.Random(0).sample(valid, min(12, len(valid))) + sp.seeds:
        src = render(fam.resolve(cfg), kernel_name="k_test")
        assert "{{" not in src and "{%" not in src
        assert 'extern "C" __global__' in src and "k_test(" in src and "k_test_scale_c(" in src
        # every parameter value reaches the source as a literal somewhere
        assert str(cfg.as_dict()[next(iter(fam.params))]) in src


def test_strict_undefined_fails_on_a_misspelled_parameter(tmp_path):
    (tmp_path / "_common.cuh.j2").write_text("")
    (tmp_path / "bad.cu.j2").write_text(
        "{#- autotune\nparams: {X: {domain: [1, 8]}}\nderived: {THREADS: 32 * X, SMEM_BYTES: 0}\n"
        "launch: {grid: ['1', '1', '1']}\n-#}\nint a = {{ Y }};\n"
    )
    fam = Family.load("bad", tmp_path)
    # One error at the template's file and line (not Jinja's traceback): search, check and export
    # all render.
    with pytest.raises(UserError, match=r"bad\.cu\.j2:6: 'Y' is undefined \(not a parameter"):
        render(fam.resolve(Config.make("bad", {"X": 1})))


# A 128x256x16 warptile config with a 3-stage pipeline, whose values the tests compute by hand.
WARPTILE_3_STAGES = dict(
    BM=128, BN=256, BK=16, WARPS_M=2, WARPS_N=4, LANES_N=8, TM=8, TN=4, STAGES=3, PAD_A=4, PAD_B=0,
    GROUP_M=8, SPLITK=1, MINB=1, PREFETCH=0, MMA_ORDER=0,
)  # fmt: skip


def test_declared_values_match_hand_computation(h100):
    fam = Family.load("coarse2d")
    env = fam.derive({"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4})
    assert env["THREADS"] == (128 // 8) * (64 // 4) == 256
    assert env["SMEM_BYTES"] == 4 * (128 * 16 + 16 * 64) == 12288
    w = Family.load("warptile")
    p = dict(WARPTILE_3_STAGES)
    env = w.derive(p)
    assert (env["THREADS"], env["WM"], env["WN"], env["WMITER"], env["WNITER"]) == (256, 64, 64, 2, 2)
    assert env["SMEM_BYTES"] == 4 * 3 * 16 * (132 + 256) == 74496
    geo = _geo(p, 4097, 1000, 5)
    assert (geo.grid, geo.block, geo.dynamic_smem, geo.scale_c) == ((33 * 4, 1, 1), 256, 74496, 0)
    assert (geo.ws_bytes, geo.ws_zeroed, geo.pack_b, geo.pack_b_at, geo.tail_tiles) == (0, 0, 0, 0, 0)
    assert geo.kernels == [""]  # N % 4 == 0: nothing to pack, no split-K, no tail


def _geo(params, M, N, K, slots=None):
    return Family.load("warptile").resolve(params).plan.geometry(M, N, K, slots)


def _seed(**change):
    return {**Space.load("warptile").seeds[0].as_dict(), **change}  # 128 x 256 tiles, BK 16


def test_b_is_packed_to_a_16_byte_pitch_only_when_its_rows_are_unaligned():
    geo = _geo(_seed(), 300, 4097, 70)
    assert geo.pack_b and geo.pack_b_at == 0 and geo.ws_bytes == 4 * 70 * 4100 and geo.pitch_b == 4100
    assert geo.kernels == ["_pack_b", ""]
    assert not _geo(_seed(), 300, 4096, 70).pack_b
    assert not _geo(_seed(PACKB=0), 300, 4097, 70).pack_b
    assert not _geo(_seed(TRANS_B=1), 300, 4097, 70).pack_b  # B^T goes by 4-byte copies anyway
    # With stream-K the packed B follows the flags and partial tiles.
    sk = _geo(_seed(SCHEDULE="stream_k"), 300, 4097, 70, slots=132)
    assert sk.pack_b_at == 16 * 33 + 4 * 132 * 128 * 256
    assert sk.ws_bytes == sk.pack_b_at + 4 * 70 * 4100


def test_a_copied_along_its_rows_is_packed_to_a_16_byte_pitch_only_when_those_rows_are_unaligned():
    # A stored K x M (TRANS_A): rows of M floats; the copy walks K rows, after packed B.
    tn = _seed(TRANS_A=1, PACKA=1)
    geo = _geo(tn, 3261, 4097, 70)
    assert geo.pack_a and geo.pitch_a == 3264 and geo.pack_a_at == 4 * 70 * 4100
    assert geo.ws_bytes == 4 * 70 * 4100 + 4 * 70 * 3264
    assert geo.kernels == ["_pack_b", "_pack_a", ""]
    step = next(s for s, _ in geo.launches if s.kernel == "_pack_a")
    assert step.args == ("K", "M", "lda", "pitch_a", "A_IN", "A_PACKED") and not step.beta_only
    main = next(s for s, _ in geo.launches if s.kernel == "")
    assert main.args[4:6] == ("A", "lda_k")  # the kernel reads A through lda_k: pitch_a when packed
    assert not _geo(tn, 3264, 4097, 70).pack_a  # M % 4 == 0: rows already aligned
    assert not _geo(_seed(TRANS_A=1), 3261, 4097, 70).pack_a  # PACKA 0: in place, as before
    # A stored M x K, its tile kept as stored (A_ROWS): rows of K floats, M of them.
    rows = _geo(_seed(A_ROWS=1, PACKA=1), 300, 4096, 70)
    assert rows.pack_a and rows.pitch_a == 72 and rows.pack_a_at == 0 and rows.ws_bytes == 4 * 300 * 72
    step = next(s for s, _ in rows.launches if s.kernel == "_pack_a")
    assert step.args[:2] == ("M", "K")
    assert not _geo(_seed(A_ROWS=1, PACKA=1), 300, 4096, 72).pack_a


def test_packa_is_only_for_an_a_copied_along_its_rows_and_one_matrix():
    w = Family.load("warptile")
    rule = "PACKA packs A where the kernel copies it along its rows (TRANS_A, A_ROWS), one matrix"
    # nn with A's tile transposed reads A by 4-byte copies anyway; a batch reads A in place.
    assert w.broken_rules(w.resolve(_seed(PACKA=1)).config) == [rule]
    assert rule in w.broken_rules(w.resolve(_seed(PACKA=1, TRANS_A=1, BATCHED=1)).config)
    assert w.broken_rules(w.resolve(_seed(PACKA=1, TRANS_A=1)).config) == []
    # Built for a layout that cannot pack, the config drops PACKA.
    built = w.built_for(w.resolve(_seed(PACKA=1, TRANS_A=1)).config, Problem(300, 300, 300))
    assert built.as_dict()["PACKA"] == 0 and w.broken_rules(built) == []
    # Only the configs that may pack hold the copy; the others render as before it existed.
    assert "_pack_a(" in render(w.resolve(_seed(PACKA=1, TRANS_A=1)))
    assert "_pack_a(" not in render(w.resolve(_seed(TRANS_A=1)))


def test_a_search_weighs_packing_a_only_where_its_copied_rows_are_unaligned():
    sp = Space.load("warptile")
    assert sp.values["PACKA"] == [0]  # the space file leaves it out: no trials where it changes nothing
    for problem, opened in [
        (Problem(2293, 2293, 2293, "tn"), True),  # A stored K x M, M % 4 != 0
        (Problem(2292, 2293, 2293, "tt"), False),
        (Problem(300, 300, 301), True),  # A stored M x K, K % 4 != 0 (A_ROWS packs it)
        (Problem(301, 300, 300, "nt"), False),
        (Problem(300, 300, 301, batch=3), False),  # a batch reads A in place
    ]:
        assert sp.for_problem(problem).values["PACKA"] == ([0, 1] if opened else [0]), problem.name
    # Families without the parameter are left as they are.
    assert "PACKA" not in Space.load("vectorized").for_problem(Problem(301, 300, 300, "tn")).values


def test_at_unaligned_k_a_search_tries_a_rows_only_with_a_packed():
    # A_ROWS 1 unpacked at K % 4 != 0 copies both operands by 4 bytes; A_ROWS 0 keeps B's 16 bytes.
    sp = Space.load("warptile")
    seed = sp.seeds[0].as_dict()
    narrow = dataclasses.replace(sp, values={p: [seed.get(p, v[0])] for p, v in sp.values.items()} | {"A_ROWS": [0, 1]})

    def points(problem):
        en = narrow.for_problem(problem).enumerate(profile_for_arch("sm_90"))
        return sorted((dict(c.params)["A_ROWS"], dict(c.params)["PACKA"]) for c in en.valid)

    assert points(Problem(300, 300, 301)) == [(0, 0), (1, 1)]
    assert points(Problem(300, 300, 301, "nt")) == [(0, 0), (1, 1)]
    assert points(Problem(300, 300, 300)) == [(0, 0), (1, 0)]  # aligned: nothing to pack
    assert points(Problem(301, 300, 300, "tn")) == [(0, 0), (0, 1)]  # A stored K x M: no A_ROWS
    assert points(Problem(300, 300, 301, batch=2)) == [(0, 0), (1, 0)]  # a batch is not packed
    # The problem's rule is part of the space's identity: its count is cached apart.
    lim = profile_for_arch("sm_90")
    assert count_key(narrow.for_problem(Problem(300, 300, 301)), lim) != count_key(narrow, lim)


def test_stream_k_launch_reads_the_device_slots():
    w = Family.load("warptile")
    p = dict(WARPTILE_3_STAGES, SCHEDULE="stream_k")
    plan = w.resolve(p).plan
    assert plan.needs_slots
    with pytest.raises(ValueError, match="SLOTS"):
        plan.geometry(4096, 4096, 4096)
    # 512 tiles on 132 slots: a persistent grid of 132 blocks, one flag and one partial tile each.
    geo = plan.geometry(4096, 4096, 4096, slots=132)
    assert geo.grid == (132, 1, 1) and not geo.scale_c
    assert geo.ws_bytes == 16 * 33 + 4 * 132 * 128 * 256 and geo.ws_zeroed == 16 * 33
    # Fewer k-iterations than slots (1 tile, K = 20: 2 iterations): no idle blocks.
    assert plan.geometry(5, 7, 20, slots=132).grid == (2, 1, 1)
    # Without stream-K the same family needs no slots and no workspace.
    plain = w.resolve({**p, "SCHEDULE": "data_parallel"}).plan
    assert not plain.needs_slots and plain.geometry(4096, 4096, 4096).ws_bytes == 0


def test_split_launch_gives_the_tail_what_whole_waves_leave():
    w = Family.load("warptile")
    plan = w.resolve(_seed(SCHEDULE="split_launch")).plan
    assert plan.needs_slots and plan.has_tail  # its module holds the tail kernel
    assert not any(w.resolve(_seed(SCHEDULE=s)).plan.has_tail for s in ("data_parallel", "stream_k"))

    def split(M, N, K, slots=132):
        g = plan.geometry(M, N, K, slots=slots)
        tiles = -(-M // 128) * -(-N // 256)
        assert g.grid[0] + g.tail_tiles == tiles
        # Unaligned rows of C with a sixth of the tiles or more in the tail: C through a copy.
        pack_c = N % 4 != 0 and g.tail_tiles > 0 and 6 * g.tail_tiles >= tiles
        assert g.pack_c == pack_c
        packed = (4 * K * 4 * -(-N // 4) if N % 4 else 0) + (4 * M * 4 * -(-N // 4) if pack_c else 0)
        assert g.tail_first == g.grid[0] and g.ws_bytes == packed
        # The tail's tiles of C are scaled, the main kernel runs where it has tiles, then the tail.
        assert g.kernels == (["_pack_c"] if pack_c else []) + (["_pack_b"] if N % 4 else []) + (
            ["_scale_tiles"] if g.tail_tiles else []
        ) + ([""] if g.grid[0] else []) + (["_tail"] if g.tail_tiles else []) + (["_unpack_c"] if pack_c else [])
        return g.grid[0], g.tail_tiles, g.tail_grid

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
    # Unaligned rows of C: 144 tiles all in the tail, or 165 of 561 (C packed for both); 165 of
    # 2145 (less than a sixth: C written in place).
    assert split(2048, 2049, 2048) == (0, 144, 132) and split(4097, 4097, 64) == (396, 165, 132)
    assert split(8193, 8193, 64) == (1980, 165, 132)
    # Whole tiles have no tail and need no slots.
    plain = w.resolve(_seed(SCHEDULE="data_parallel")).plan
    assert not plain.needs_slots and plain.geometry(4096, 4096, 4096).tail_tiles == 0


def test_split_persistent_is_a_persistent_grid_with_two_zeroed_counters():
    plan = Family.load("warptile").resolve(_seed(SCHEDULE="split_persistent")).plan
    assert plan.needs_slots and not plan.has_tail  # one kernel: no tail kernel in its module
    geo = plan.geometry(4096, 4096, 4096, slots=132)
    assert geo.grid == (132, 1, 1) and geo.kernels == [""] and not geo.scale_c
    assert geo.ws_bytes == 16 and geo.ws_zeroed == 16
    # Fewer k-iterations than slots (1 tile, K = 20: 2 iterations): no idle blocks.
    assert plan.geometry(5, 7, 20, slots=132).grid == (2, 1, 1)
    # Packed B follows the counters, and packed C (51 tiles, all in the tail) packed B.
    packed = plan.geometry(300, 4097, 70, slots=132)
    assert packed.pack_b and packed.pack_b_at == 16 and packed.pack_c and packed.pack_c_at == 16 + 4 * 70 * 4100
    assert packed.ws_bytes == 16 + 4 * 70 * 4100 + 4 * 300 * 4100 and packed.pitch_c == 4100
    assert packed.kernels == ["_pack_c", "_pack_b", "", "_unpack_c"]
    # The copy of C in runs only when beta != 0 (with beta == 0 no kernel reads C).
    assert [s.beta_only for s, _ in packed.launches] == [True, False, False, False]
    # The kernels see C's packed pitch as N (B's extra columns are zero): only with B packed.
    for other in ({"PACKB": 0}, {"TRANS_B": 1}):
        plan = Family.load("warptile").resolve(_seed(SCHEDULE="split_persistent", **other)).plan
        g = plan.geometry(300, 4097, 70, 132)
        assert not g.pack_c and "_unpack_c" not in g.kernels


def test_split_persistent_applies_the_declared_tail_rule_in_its_kernel(tmp_path):
    """The tail rule is written once (launch value TAIL); split_persistent's kernel renders it to C
    over its own grid. The C, compiled on the host, gives what the declaration gives."""
    import shutil
    import subprocess

    w = Family.load("warptile")
    resolved = w.resolve(_seed(SCHEDULE="split_persistent"))
    c = dict(resolved.plan.c_values())
    rem_c, tail_c = c["REM"], c["TAIL"]
    assert f"REM = {rem_c};" in render(resolved) and f"return TILES - ({tail_c});" in render(resolved)
    cases = [(512, 132), (2048, 132), (288, 132), (32, 132), (1584, 132), (1, 2), (7, 7), (200, 66)]
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("needs a C compiler")
    prog = tmp_path / "tail.c"
    prog.write_text(
        "#include <stdio.h>\nint main(void) {\n"
        + "".join(
            f'    {{ const int TILES = {t}, SLOTS = {g}, REM = {rem_c}; printf("%d\\n", (int)({tail_c})); }}\n'
            for t, g in cases
        )
        + "    return 0;\n}\n"
    )
    subprocess.run([cc, "-o", str(tmp_path / "tail"), str(prog)], check=True)
    got = [
        int(x)
        for x in subprocess.run([str(tmp_path / "tail")], capture_output=True, text=True, check=True).stdout.split()
    ]
    rem, tail = dict(w.launch.values)["REM"], dict(w.launch.values)["TAIL"]
    env = [{**resolved.env, "TILES": t, "SLOTS": g} for t, g in cases]
    assert got == [tail({**e, "REM": rem(e)}) for e in env]
    assert got[:4] == [116, 68, 156, 32]  # the split launch's figures (test above)


def test_split_fused_puts_a_row_of_tail_blocks_before_the_whole_waves():
    plan = Family.load("warptile").resolve(_seed(SCHEDULE="split_fused")).plan
    assert plan.needs_slots and not plan.has_tail

    def grid(M, N, K, slots=132):
        g = plan.geometry(M, N, K, slots=slots)
        assert not g.tail_tiles and g.ws_zeroed == 16 and g.grid[2] == 1
        return g.grid[:2]

    # The tail rows follow the split launch's rule (test_split_launch_gives_the_tail_...).
    assert grid(4096, 4096, 4096) == (132, 1 + 3) and grid(8192, 8192, 8192) == (132, 1 + 15)
    assert grid(3000, 3000, 3000) == (132, 1 + 1) and grid(1024, 1024, 1024) == (132, 1)
    assert grid(128 * 12, 256 * 11, 64) == (132, 1 + 1)  # whole waves exactly: an empty tail row
    assert grid(5, 7, 20) == (132, 1) and grid(4096, 4096, 4096, slots=264) == (264, 1 + 1)


def test_the_space_seeds_stream_k_with_packed_b(h100):
    # tests/device/test_streamk.py runs over these seeds: without any, it would collect no case.
    sp = Space.load("warptile")
    sk = [c for c in sp.seeds if c["SCHEDULE"] == "stream_k"]
    assert len(sk) >= 2 and all(c["PACKB"] == 1 for c in sk)
    assert sp.values["SCHEDULE"] == ["data_parallel", "stream_k", "split_launch", "split_persistent", "split_fused"]
    assert all(not sp.family.violations(c, h100) for c in sk)


def test_stream_k_excludes_split_k(h100):
    w = Family.load("warptile")
    cfg = w.resolve(_seed(SCHEDULE="stream_k", SPLITK=2)).config
    assert any("already split K" in r for r in w.violations(cfg, h100))


def test_a_parameter_added_later_takes_its_default_in_stored_configs_and_spaces(tmp_path):
    w = Family.load("warptile")
    old = {k: v for k, v in _seed().items() if k not in ("SCHEDULE", "PACKB")}
    assert w.validate_params(old, "stored")["SCHEDULE"] == "data_parallel"
    render(w.resolve(old))  # a result stored before SCHEDULE existed still renders
    f = tmp_path / "old.yaml"
    f.write_text("space:\n" + "".join(f"  {k}: [{v}]\n" for k, v in old.items()))
    assert Space.load("warptile", f).values["SCHEDULE"] == ["data_parallel"]
    no_default = {k: v for k, v in old.items() if k != "MINB"}
    with pytest.raises(UserError, match="missing parameter 'MINB'"):
        w.validate_params(no_default, "stored")


def test_a_config_stored_with_the_integer_schedule_reads_as_its_name():
    """Configs stored before schedules had names (STREAMK 0-4) resolve to the same config."""
    w = Family.load("warptile")
    old = {k: v for k, v in _seed().items() if k != "SCHEDULE"}
    names = ["data_parallel", "stream_k", "split_launch", "split_persistent", "split_fused"]
    for i, name in enumerate(names):
        assert w.resolve({**old, "STREAMK": i}).config == w.resolve({**old, "SCHEDULE": name}).config
    with pytest.raises(UserError, match="STREAMK=5"):
        w.resolve({**old, "STREAMK": 5})
    with pytest.raises(UserError, match="SCHEDULE must be one of"):
        w.resolve({**old, "SCHEDULE": "streamk"})


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


# warptile's whole space is 10^7 points: a slice of it keeps a rule at every level.
WARPTILE_SLICE = dict(BK=[8, 32], STAGES=[2, 4], PREFETCH=[0], SPLITK=[1, 4], MMA_ORDER=[0])
# Brute force takes seconds up to ~10^4 points; larger spaces (warptile, colstage) are checked by a slice below.
SMALL_SPACES = [f for f in FAMILIES if math.prod(len(v) for v in Space.load(f).values.values()) <= 20_000]


def test_small_spaces_are_brute_forced():
    assert len(SMALL_SPACES) >= 4


@pytest.mark.parametrize("family", SMALL_SPACES)
def test_enumeration_equals_brute_force(family, h100):
    sp = Space.load(family)
    en = sp.enumerate(h100)
    brute = set()
    for values in itertools.product(*sp.values.values()):
        cfg = Config.make(family, dict(zip(sp.values, values, strict=True)))
        if not sp.family.violations(cfg, h100):
            brute.add(cfg)
    assert set(en.valid) == brute
    assert sum(en.rejected.values()) == en.total - len(en.valid)


@pytest.mark.parametrize(
    "family, cut",
    [
        # warptile's slice is its walk's too (test_enumeration_is_the_walk_...): brute force under -m slow.
        pytest.param("warptile", WARPTILE_SLICE, marks=pytest.mark.slow),
        ("colstage", dict(STAGES=[2, 4], KSPLIT=[1, 4])),
    ],
)
def test_enumeration_equals_brute_force_on_a_slice(family, cut, h100):
    sp = Space.load(family)
    assert math.prod(len(v) for v in sp.values.values()) > 20_000  # too large for SMALL_SPACES
    small = dict(sp.values, **cut)
    sp = Space(sp.family, small, [], "slice")
    en = sp.enumerate(h100)
    brute = {
        c
        for c in (Config.make(family, dict(zip(small, v, strict=True))) for v in itertools.product(*small.values()))
        if not sp.family.violations(c, h100)
    }
    assert set(en.valid) == brute and len(brute) > 50


def test_empty_space_names_the_constraints(h100):
    fam = Family.load("coarse2d")
    sp = Space.from_dict(fam, {"space": {"BM": [256], "BN": [256], "BK": [64], "TM": [1, 2], "TN": [1]}}, "x.yaml")
    en = sp.enumerate(h100)
    assert en.valid == []
    msg = sp.describe_empty(en)
    # BK fixes the shared memory (4 * 64 * 512 B) before TM is chosen: that rule cuts both.
    assert msg == "family coarse2d: no valid point among 2 (x.yaml); 'shared memory <= device limit' removed 2"


@pytest.mark.parametrize(
    "doc, fragment",
    [
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
    ],
)
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
    assert f"{path}:3: malformed YAML" in str(exc.value)


def test_yaml_tags_are_not_executed(tmp_path):
    path, pwned = tmp_path / "space.yaml", tmp_path / "pwned"
    path.write_text(f"space: !!python/object/apply:os.mkdir ['{pwned}']\n")  # executed, it makes a folder
    with pytest.raises(UserError) as exc:
        Space.load("coarse2d", path)
    assert not pwned.exists()
    assert str(path) in str(exc.value) and "python/object/apply:os.mkdir" in str(exc.value)


def test_default_configs_are_valid_yaml_with_valid_seeds(h100):
    """Seeds for any layout are points of the space as written; a seed that names its layout is a
    point of the space but for that layout, and fits the H100."""
    for fam in FAMILIES:
        sp = Space.load(fam)
        valid = set(sp.enumerate(h100).valid)
        assert sp.seeds, fam
        for seed in sp.seeds:
            layout = sp.seed_layout(seed)
            if not layout:
                assert seed in valid, (fam, seed.name)
                continue
            assert all(v in sp.values[p] or p in layout for p, v in seed.params), (fam, seed.name)
            assert not sp.family.violations(seed, h100), (fam, seed.name)


def test_a_seed_that_names_its_layout_is_tried_for_that_layout_only(h100):
    """warptile's PACKB 2 seeds (B transposed into the workspace first) name TRANS_B = 1: they are
    kept for nt and tt and left out of nn and tn, where PACKB 2 breaks a rule; the other seeds
    are built for every layout."""
    sp = Space.load("warptile")
    named = [s for s in sp.seeds if sp.seed_layout(s)]
    assert named and all(s["PACKB"] == 2 and s["TRANS_B"] == 1 for s in named)
    for layout in ("nn", "nt", "tn", "tt"):
        problem = Problem(4096, 4096, 4096, layout)
        seeds = sp.seeds_for(problem).for_problem(problem).seeds
        packed = [s for s in seeds if s["PACKB"] == 2]
        assert len(packed) == (len(named) if layout[1] == "t" else 0), layout
        assert len(seeds) == len(sp.seeds) - (0 if layout[1] == "t" else len(named)), layout
        assert all(s["TRANS_A"] == (layout[0] == "t") and s["TRANS_B"] == (layout[1] == "t") for s in seeds)
        assert all(not sp.family.broken_rules(s) for s in seeds), layout


def _walk(sp: Space, limits) -> tuple[list[Config], collections.Counter]:
    """The enumeration as a depth-first walk, one point at a time: the reference for its order,
    its points and the first rule blamed for each point removed."""
    fam, order = sp.family, list(sp.values)
    derived = [*fam.derived.items(), ("DYNAMIC_SMEM", fam.launch.dynamic_smem)]
    params_of: dict[str, set[str]] = {p: {p} for p in order}
    for name, ex in derived:
        params_of[name] = set().union(*(params_of[n] for n in ex.names))
    depth = {p: i for i, p in enumerate(order)}

    def level(names):
        return max((depth[p] for n in names for p in params_of[n]), default=0)

    below = [math.prod(len(sp.values[p]) for p in order[i + 1 :]) for i in range(len(order))]
    valid, rejected, env = [], collections.Counter(), {}

    def walk(d):
        for v in sp.values[order[d]]:
            env[order[d]] = v
            for name, ex in derived:
                if level(ex.names) == d:
                    env[name] = int(ex(env))
            rules = (c for c in [*fam.constraints, *sp.rules] if level(c.names) == d)
            failed = next((c for c in rules if not c.holds(env, limits)), None)
            if failed is not None:
                rejected[failed.label] += below[d]
            elif d == len(order) - 1:
                valid.append(Config.make(fam.name, {p: env[p] for p in order}))
            else:
                walk(d + 1)

    walk(0)
    return valid, rejected


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f == "fewcols" else f for f in FAMILIES])
# One shape for every family but fewcols (17 s) in the default run; fewcols and the other shapes
# (a row, a sliver, a short K) under -m slow.
@pytest.mark.parametrize(
    "shape",
    [(4096, 4096, 4096)]
    + [pytest.param(s, marks=pytest.mark.slow) for s in [(1, 4096, 4096), (3000, 8, 77), (8192, 8192, 1024)]],
)
def test_enumeration_is_the_walk_in_its_order_with_the_same_blame(family, shape, h100):
    sp = Space.load(family)
    problem = Problem(*shape)
    if family == "warptile":
        sp = Space(sp.family, dict(sp.values, **WARPTILE_SLICE), [], "slice")
    if not sp.family.gaps(problem):  # a family of another precision tier: its space as written
        sp = sp.for_problem(problem)
    en = sp.enumerate(h100)
    valid, rejected = _walk(sp, h100)
    assert en.valid == valid and en.rejected == rejected
    assert [c.name for c in en.valid] == [Config(c.family, c.params).name for c in valid]
    assert sum(rejected.values()) == en.total - len(valid)


def test_enumeration_of_a_space_with_no_valid_point_past_the_first_level(h100):
    fam = Family.load("coarse2d")
    sp = Space.from_dict(fam, {"space": {"BM": [256], "BN": [256], "BK": [64], "TM": [1, 2], "TN": [1]}}, "x.yaml")
    assert _walk(sp, h100) == ([], sp.enumerate(h100).rejected)


@pytest.mark.parametrize("family", ["fewrows", "warptile"])
def test_enumeration_in_slices_of_a_few_rows_is_the_same(family, h100, monkeypatch):
    """A level whose rows would pass CHUNK_ROWS is taken in slices, one after another: the same
    points in the same order, the same blame, whatever the slice."""
    import autotune.kernels.enumeration as enumeration_module

    sp = Space.load(family).for_problem(Problem(8, 4096, 4096))
    if family == "warptile":
        sp = Space(sp.family, dict(sp.values, **WARPTILE_SLICE), [], "slice")
    whole = sp.enumerate(h100)
    monkeypatch.setattr(enumeration_module, "CHUNK_ROWS", 37)
    sliced = sp.enumerate(h100)
    assert sliced.valid == whole.valid and sliced.rejected == whole.rejected and len(whole.valid) > 100
    assert [c.name for c in sliced.valid] == [Config(c.family, c.params).name for c in whole.valid]


def test_the_readmes_family_table_lists_every_family_with_its_valid_space(h100, monkeypatch, tmp_path):
    """README's Families table: a row for each family, its last column the space's size and the
    points that pass the static filter under sm_90's limits, as `autotune list --count` prints."""
    import re

    from autotune.kernels.counts import count_valid
    from autotune.kernels.limits import profile_for_arch

    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))  # counted now, not read from a cache
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\| `(\w+)` \|.*\| ([\d,]+) of ([\d,]+) \|$", line)
        if m:
            rows[m.group(1)] = (int(m.group(2).replace(",", "")), int(m.group(3).replace(",", "")))
    assert sorted(rows) == sorted(FAMILIES)
    limits = profile_for_arch(None)
    for name, (valid, size) in rows.items():
        sp = Space.load(name)
        assert (valid, size) == (count_valid(sp, limits), sp.size), name
