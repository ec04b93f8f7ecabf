"""NVRTC without a GPU: compile for sm_90, read registers and spills, reject what spills."""

import os
import re

import pytest
from helpers import EVERY, ROOT, families, some

from autotune.core.types import Config, Problem, Status
from autotune.gpu.compile import CompileError, compile_source, parse_resources
from autotune.kernels.family import Family
from autotune.kernels.render import DEFAULT_KERNEL, render
from autotune.kernels.sass import analyze_cubin, find_cuobjdump
from autotune.kernels.space import Space
from autotune.search.evaluate import prepare
from tests.kernels.test_space import WARPTILE_3_STAGES

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_scale_c' for 'sm_90'
ptxas info    : Function properties for k_scale_c
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     184 bytes stack frame, 176 bytes spill stores, 180 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 16384 bytes smem, 400 bytes cmem[0]
"""


def _build(params, family: Family | str = "warptile", fresh: bool = False):
    """A config's module built for sm_90 (`fresh`: not from the compile cache)."""
    fam = Family.load(family) if isinstance(family, str) else family
    return compile_source(render(fam.resolve(params)), "sm_90", DEFAULT_KERNEL, use_cache=not fresh)


def test_parse_resources_per_kernel():
    r = parse_resources(LOG, "k")
    assert (r.registers, r.spill_bytes, r.stack_bytes, r.smem_static_bytes) == (128, 356, 184, 16384)
    s = parse_resources(LOG, "k_scale_c")
    assert (s.registers, s.spill_bytes, s.smem_static_bytes) == (12, 0, 0)
    with pytest.raises(CompileError):
        parse_resources(LOG, "missing")


@pytest.mark.slow  # every family's seeds through NVRTC: 30 s on two cores (CI's slow step)
def test_seed_kernels_compile_for_sm90_with_their_resources():
    seen = {}
    for fam in families():
        f = Family.load(fam)
        cfg = Space.load(fam).seeds[0]
        c = compile_source(render(f.resolve(cfg)), f.compile_arch("sm_90"), DEFAULT_KERNEL)
        seen[fam] = c.resources
        assert c.cubin[:4] == b"\x7fELF" and 0 < c.resources.registers <= 255
        assert c.resources.spill_bytes == 0
    assert seen["tiled"].smem_static_bytes == 2 * 4 * 32 * 33
    assert seen["coarse2d"].smem_static_bytes == 4 * (128 * 16 + 16 * 128)
    assert seen["warptile"].smem_static_bytes == 0  # dynamic shared memory only


def test_cache_returns_the_same_cubin():
    f = Family.load("tiled")
    src = render(f.resolve({"TILE": 16}))
    a = compile_source(src, "sm_90", DEFAULT_KERNEL)
    b = compile_source(src, "sm_90", DEFAULT_KERNEL)
    assert b.cached and b.cubin == a.cubin and b.resources == a.resources


def test_compile_error_carries_the_log():
    with pytest.raises(CompileError) as exc:
        compile_source(
            'extern "C" __global__ void autotune_sgemm() { undefined_thing(); }',
            "sm_90",
            DEFAULT_KERNEL,
            use_cache=False,
        )
    assert "undefined_thing" in str(exc.value)


def test_post_compile_filter_rejects_spills(h100):
    # 128 accumulators per thread under a 128-register cap (MINB=2, 256 threads): spills.
    spill = Config.make("warptile", {**WARPTILE_3_STAGES, "MINB": 2})
    ok = Space.load("warptile").seeds[0]
    out = prepare([spill, ok], Problem(256, 256, 256), h100, "sm_90", {})
    assert out[0].measurement.status is Status.REJECTED and "spills" in out[0].measurement.message
    assert out[0].measurement.spill_bytes > 0
    # 7 stages of a 16-deep k-tile: A transposed with 4 floats of padding (132) and B (256).
    assert out[1].measurement is None and out[1].spec["launch"].dynamic_smem == 4 * 7 * 16 * (132 + 256)
    assert out[1].spec["resources"]["registers"] * 256 <= h100.regs_per_block


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
def test_sass_of_the_warptile_seed_is_mostly_ffma_with_wide_shared_loads():
    s = analyze_cubin(_build(Space.load("warptile").seeds[0]).cubin, DEFAULT_KERNEL).summary()
    assert s["loop_ffma"] == 16 * 128  # BK x (16 x 8 thread tile)
    assert s["loop_ffma_share"] > 0.85
    assert s["loop_lds"].get("LDS.128", 0) == 16 * 6 and s["local_memory"] == 0


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
@EVERY
def test_sass_main_loop_of_a_persistent_kernel_is_its_inner_loop(every):
    """A persistent kernel's loop over its tiles holds the main loop twice (vector and scalar B
    copies) and more FFMA than either: the report must describe the inner, hot one."""
    seed = Space.load("warptile").seeds[0].as_dict()
    for schedule in some(("stream_k", "split_persistent"), every):
        c = _build({**seed, "SCHEDULE": schedule})
        s = analyze_cubin(c.cubin, DEFAULT_KERNEL)
        assert s.total["FFMA"] > 2 * 16 * 128 and s.summary()["loop_ffma"] == 16 * 128, schedule
        assert s.summary()["loop_ffma_share"] > 0.85
        r = parse_resources(c.log, DEFAULT_KERNEL)
        assert r.spill_bytes == 0 and r.registers <= 255


def test_a_split_launch_counts_its_tail_kernel():
    log = LOG + LOG.replace("'k'", "'k_tail'").replace("properties for k\n", "properties for k_tail\n").replace(
        "Used 128", "Used 200"
    )
    r = parse_resources(log, "k")
    assert (r.registers, r.spill_bytes) == (200, 2 * 356)  # the most registers, every spill


def _sass(params, kernel=DEFAULT_KERNEL, family: Family | str = "warptile", fresh: bool = False):
    """One kernel's SASS instructions (addresses dropped) in a config's module, and the compile."""
    import subprocess
    import tempfile

    c = _build(params, family, fresh)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(c.cubin)
        f.flush()
        out = subprocess.run(
            [find_cuobjdump(), "--dump-sass", "--function", kernel, f.name], capture_output=True, text=True, check=True
        ).stdout
    return [line.split("/*")[1] + line.split("*/")[1] for line in out.splitlines() if line.strip().startswith("/*")], c


def _two_builds(a_params, b_params, tries: int = 3, mask_targets: bool = False):
    """The SASS of two configs' kernels, compiled afresh, up to `tries` times until they are the
    same: in full test runs (never with a test alone) ptxas has laid out one kernel two ways, an
    instruction order or a branch target apart, and once a cached build had 247 registers where
    every fresh one had 243. Identical SASS cannot come from different code, so the retries
    cannot hide a real difference. Returns both lists of the last try and the first's compile."""
    for _ in range(tries):
        (a, compiled), (b, _) = _sass(a_params, fresh=True), _sass(b_params, fresh=True)
        if mask_targets:
            a, b = _without_branch_targets(a), _without_branch_targets(b)
        if a == b:
            break
    return a, b, compiled


def _without_branch_targets(sass: list[str]) -> list[str]:
    """SASS lines with the code addresses that branches and reconvergence points name masked."""
    target = re.compile(r"\b(BRA|BSSY|CALL\.REL(?:\.NOINC)?|BRX|JMP)(\S*\s+(?:B\d+,\s*)?)0x[0-9a-f]+")
    # The target is also inside such an instruction's 64-bit encoding, printed beside it.
    encoding = re.compile(r"0x[0-9a-f]{16}")
    return [encoding.sub("ENC", target.sub(r"\1\2ADDR", i)) if target.search(i) else i for i in sass]


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
@pytest.mark.slow  # NVRTC builds and SASS of both kernels: 20 s on two cores (CI's slow step)
def test_split_launch_main_kernel_is_the_whole_tile_kernel():
    """The split launch's module holds the whole-tile kernel and the tail: its whole waves must
    run exactly the whole-tile config's code (an A/B of the two schedules rests on it)."""
    seed = {**Space.load("warptile").seeds[0].as_dict(), "LANES_N": 4}  # its tail needs 254 registers
    split, whole, c = _two_builds({**seed, "SCHEDULE": "split_launch"}, {**seed, "SCHEDULE": "data_parallel"})
    assert len(whole) > 1000 and split == whole
    tail = parse_resources(c.log.replace("'autotune_sgemm'", "'main'"), DEFAULT_KERNEL + "_tail")
    assert tail.spill_bytes == 0 and tail.registers <= 255


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
@pytest.mark.slow  # NVRTC builds and SASS: 15 s on two cores (CI's slow step)
def test_split_launch_tail_keeps_its_main_loop_out_of_the_loop_over_pieces():
    """Inlined into the tail kernel's loop over pieces, the main loop ran 6-7% slower per
    k-iteration than the whole-tile kernel's; out of line, 0.8% (benchmarks/logs/INDEX.md). Its hot loop
    must stay the whole-tile kernel's size, not grow with the pieces' bookkeeping."""
    seed = Space.load("warptile").seeds[0].as_dict()
    c = _build({**seed, "SCHEDULE": "split_launch"})
    whole = analyze_cubin(c.cubin, DEFAULT_KERNEL).summary()
    tail = analyze_cubin(c.cubin, DEFAULT_KERNEL + "_tail").summary()
    assert tail["loop_ffma"] == whole["loop_ffma"] == 16 * 128
    assert tail["loop_instructions"] <= whole["loop_instructions"] + 2, (tail, whole)
    r = parse_resources(c.log, DEFAULT_KERNEL)
    assert r.spill_bytes == 0 and r.stack_bytes == 0


def test_nvrtc_own_cache_is_off_unless_the_user_set_it(tmp_path):
    """NVRTC's cache (under CUDA's JIT cache switch) drops ptxas's report on a hit;
    autotune turns it off for itself before the first compile, and keeps a user's setting."""
    import os
    import subprocess
    import sys

    code = (
        "import os; from autotune.gpu.compile import compile_many; compile_many([], 'sm_90'); "
        "print(os.environ.get('CUDA_CACHE_DISABLE'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "CUDA_CACHE_DISABLE"}

    def run(e):
        return subprocess.run(
            [sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True
        ).stdout.strip()

    assert run(env) == "1"
    assert run({**env, "CUDA_CACHE_DISABLE": "0"}) == "0"


def test_the_evaluator_offers_the_first_compiled_candidate(monkeypatch, h100):
    """GPUEvaluator compiles each candidate on its own thread; first_ready names one that is
    done, whatever the order they were asked in (the GPU need not wait for the slowest)."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    import autotune.search.evaluate as E

    release = threading.Event()

    def fake_prepare(configs, problem, limits, arch, families, jobs):
        if configs[0]["BM"] != 64:
            release.wait(10)  # the others compile "slowly"
        return [E.Prepared(configs[0], spec={"name": configs[0].name})]

    monkeypatch.setattr(E, "prepare", fake_prepare)
    ev = object.__new__(E.GPUEvaluator)  # no worker, no GPU: only the compile side
    ev._compiler, ev._prepared, ev.families = ThreadPoolExecutor(4), {}, {}
    ev.limits, ev.arch = h100, "sm_90"
    valid = Space.load("coarse2d").enumerate(h100).valid
    slow = [c for c in valid if c["BM"] != 64][:3]
    fast = next(c for c in valid if c["BM"] == 64)
    cands, p = slow + [fast], Problem(512, 512, 512)
    t0 = time.monotonic()
    assert ev.first_ready(cands, p) == 3 and time.monotonic() - t0 < 5
    release.set()
    assert [x.config for x in ev._prepare(cands, p)] == cands  # and each comes back as its own
    ev._compiler.shutdown()


@EVERY
def test_fewcols_lane_rows_seeds_compile_in_both_layouts_without_spills(every):
    """fewcols' lane-a-row kernel (LANE_ROWS): its seeds (16-64 columns) build for B stored K x N
    and N x K with no spills, a bigger tile of rows per block than the lanes-along-K kernel."""
    fam = Family.load("fewcols")
    rows = [c for c in Space.load("fewcols").seeds if dict(c.params).get("LANE_ROWS")]
    assert {dict(c.params)["NR"] for c in rows} >= {16, 32, 64}
    for cfg in some(rows, every):
        for trans_b in (0, 1):
            resolved = fam.resolve({**cfg.as_dict(), "TRANS_B": trans_b})
            env = resolved.env
            assert env["BM"] == 32 * env["RPW"] * env["WARPS"]
            res = compile_source(render(resolved), "sm_90", DEFAULT_KERNEL).resources
            assert res.spill_bytes == 0 and res.registers <= 255, (cfg.name, trans_b, res)
    # The lanes-along-K kernel keeps its 16-column limit; the lane-a-row one needs float4 rows of B.
    assert fam.broken_rules(Config.make("fewcols", {**rows[0].as_dict(), "LANE_ROWS": 0, "NR": 32}))
    assert fam.broken_rules(Config.make("fewcols", {**rows[0].as_dict(), "NR": 2}))


def _seeds_build_without_spills_in_both_b_layouts(fam: Family, sp: Space, every: bool) -> None:
    """A few-column family's seeds and fallback, for B stored K x N and N x K, build for sm_90
    within the register file and without spills (`every`: else the fallback and the first seed)."""
    for cfg in [sp.fallback, *some(sp.seeds, every)]:
        for trans_b in (0, 1):
            resolved = fam.resolve({**cfg.as_dict(), "TRANS_B": trans_b})
            res = compile_source(render(resolved), "sm_90", DEFAULT_KERNEL).resources
            assert res.spill_bytes == 0 and res.registers <= 255, (cfg.name, trans_b, res)


@EVERY
@pytest.mark.slow  # NVRTC builds and SASS of the seeds: 10 s on two cores (CI's slow step)
def test_colstream_seeds_compile_without_spills_and_read_b_off_distinct_banks(every):
    """colstream: its seeds and fallback build for B stored K x N and N x K with no spills, and at
    every NR of its space the ring's padding puts the 16-byte reads of B by 8 consecutive lanes
    (lane l reads row 4 l + t of a step) in 8 distinct groups of four banks."""
    fam = Family.load("colstream")
    sp = Space.load("colstream")
    _seeds_build_without_spills_in_both_b_layouts(fam, sp, every)
    for nr in sp.values["NR"]:
        env = fam.derive({**sp.fallback.as_dict(), "NR": nr})
        for t in range(4):
            groups = {((lane * env["GROUP"] + t * nr) // 4) % 8 for lane in range(8)}
            assert len(groups) == 8, (nr, t)
    # Without the padding (4 rows of B packed back to back) the same reads would collide.
    assert len({(lane * 4 * 8 // 4) % 8 for lane in range(8)}) < 8
    assert fam.broken_rules(Config.make("colstream", {**sp.fallback.as_dict(), "NR": 6}))
    assert fam.broken_rules(Config.make("colstream", {**sp.fallback.as_dict(), "NR": 32, "RPW": 4}))


@EVERY
def test_colstage_seeds_compile_without_spills_and_read_a_and_b_off_distinct_banks(every):
    """colstage: its seeds and fallback build for B stored K x N and N x K with no spills; at every
    split of a warp's lanes (KL lanes along K) a quarter warp's float4 reads of A (lane l: row
    (l / KL) of its rows, k 4 (l % KL)) fall in 8 distinct groups of four banks with the rows'
    padding, and at every NR its lane groups' float4 reads of B (row 4 kl + t) in as many distinct
    groups as there are distinct addresses."""
    fam = Family.load("colstage")
    sp = Space.load("colstage")
    _seeds_build_without_spills_in_both_b_layouts(fam, sp, every)

    def a_groups(kl_lanes, pitch):
        return {((lane // kl_lanes) * pitch + 4 * (lane % kl_lanes)) // 4 % 8 for lane in range(8)}

    for kl in sp.values["KL"]:
        env = fam.derive({**sp.fallback.as_dict(), "KL": kl})
        assert len(a_groups(kl, env["LDAS"])) == 8, kl
        for nr in sp.values["NR"]:
            env = fam.derive({**sp.fallback.as_dict(), "KL": kl, "NR": nr})
            for t in range(4):
                addrs = {(lane % kl) * env["GROUP"] + t * nr for lane in range(8)}
                assert len({a // 4 % 8 for a in addrs}) == len(addrs), (kl, nr, t)
    # Without the rows' padding, 2 and 4 lanes along K would put 4 and 2 rows on the same banks.
    assert len(a_groups(2, 256)) < 8 and len(a_groups(4, 256)) < 8
    assert fam.broken_rules(Config.make("colstage", {**sp.fallback.as_dict(), "KSTAGE": 128, "WARPS": 16}))


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
@EVERY
@pytest.mark.slow  # NVRTC builds of both kernels: 20 s on two cores (CI's slow step)
def test_b_transposed_into_the_workspace_runs_the_nn_kernel(every):
    """PACKB 2 (B stored N x K copied transposed into the workspace first): the SGEMM kernel of an
    nt config is the nn config's, instruction for instruction, and tt's is tn's; the pack kernel
    is the transposing one (through shared memory), where nn's packs rows as they lie."""
    seeds = [s for s in Space.load("warptile").seeds if s["PACKB"] == 2]
    # Each case is four builds of a large kernel, two of them fresh: the default run takes nt's.
    for seed, trans_a in some([(s, t) for s in seeds for t in (0, 1)], every):
        # Branch targets aside: two builds of one kernel (in separate modules) have come out
        # with one branch aimed 16 bytes apart and every instruction at every address the same
        # (in full test runs on the CPU machine, never with the test alone).
        packed, in_place, c = _two_builds(
            {**seed.as_dict(), "TRANS_A": trans_a},
            {**seed.as_dict(), "TRANS_A": trans_a, "TRANS_B": 0, "PACKB": 1},
            mask_targets=True,
        )
        assert len(packed) > 1000 and packed == in_place, (seed.name, trans_a)
        r = parse_resources(c.log, DEFAULT_KERNEL)
        assert r.spill_bytes == 0 and r.registers <= 255
        pack, _ = _sass({**seed.as_dict(), "TRANS_A": trans_a}, DEFAULT_KERNEL + "_pack_b")
        rows, _ = _sass({**seed.as_dict(), "TRANS_B": 0, "PACKB": 1}, DEFAULT_KERNEL + "_pack_b")
        assert any("STS" in i for i in pack) and not any("STS" in i for i in rows)


def test_b_kept_as_stored_goes_by_16_byte_copies_and_c_by_4_byte_stores():
    """B_ROWS (B stored N x K): B's tile travels by 16-byte cp.async where in place (B_ROWS 0) it
    goes 4 bytes at a time, and a thread's columns lie LANES_N apart, so C is stored 4 bytes at a
    time; neither spills. Built for nn (B stored K x N) a B_ROWS config is its B_ROWS 0 form."""
    from autotune.dispatch.table import built_for

    small = {"BM": 64, "BN": 64, "BK": 16, "WARPS_M": 2, "WARPS_N": 2, "LANES_N": 8, "TM": 4, "TN": 4, "MINB": 2}
    nt = {**Space.load("warptile").seeds[0].as_dict(), **small, "TRANS_B": 1, "PACKB": 1, "PAD_B": 4}
    ops = {}
    for rows in (0, 1):
        ins, c = _sass({**nt, "B_ROWS": rows})
        assert c.resources.spill_bytes == 0
        ops[rows] = {t for i in ins for t in i.split()[1:3]}
    assert "LDGSTS.E.BYPASS.128.ZFILL" in ops[1] and not any(t.startswith("LDGSTS.E.BYPASS.128") for t in ops[0])
    assert "STG.E.128" in ops[0] and "STG.E.128" not in ops[1]
    config = Config.make("warptile", {**nt, "B_ROWS": 1})
    assert dict(built_for(config, "nn").params)["B_ROWS"] == 0 and dict(built_for(config, "tt").params)["B_ROWS"] == 1


@EVERY
def test_fewrows_warps_along_k_seeds_compile_in_both_layouts_without_spills(h100, every):
    """fewrows with WK warps of a block along K: its seeds build for A stored M x K and K x M with
    no spills and their sums' buffer inside the shared memory the rules allow; WK = 1 renders no
    such buffer, and a block of WK x WARPS warps above 1024 threads is refused."""
    fam = Family.load("fewrows")
    deep = [c for c in Space.load("fewrows").seeds if dict(c.params).get("WK", 1) > 1]
    assert {dict(c.params)["MR"] for c in deep} >= {1, 8, 16}
    for cfg in some(deep, every):
        for trans_a in (0, 1):
            resolved = fam.resolve({**cfg.as_dict(), "TRANS_A": trans_a})
            env = resolved.env
            assert env["THREADS"] == 32 * env["WARPS"] * env["WK"] and env["KL"] == env["KT"] * env["WK"]
            source = render(resolved)
            assert f"red[{env['WK']}][{env['MR']}][{env['BN'] // 4}]" in source
            res = compile_source(source, "sm_90", DEFAULT_KERNEL).resources
            assert res.spill_bytes == 0 and res.smem_static_bytes <= env["SMEM_BYTES"] + 64, (cfg.name, trans_a, res)
    flat = {**deep[0].as_dict(), "WK": 1}
    assert "red[" not in render(fam.resolve(flat))
    # A k-major (AK): As[k][r], read four rows at a time; only for whole groups of four rows.
    k_major = [c for c in deep if dict(c.params).get("AK")]
    env = fam.resolve(k_major[0]).env
    assert f"As[{env['KCHUNK']}][{env['MR']}]" in render(fam.resolve(k_major[0]))
    assert fam.broken_rules(Config.make("fewrows", {**k_major[0].as_dict(), "MR": 2}))
    too_many = Config.make("fewrows", {**flat, "WARPS": 4, "WK": 16})
    assert any("threads 2048" in v for v in fam.violations(too_many, h100))


@pytest.mark.slow  # every warps-along-K seed in both layouts (about 12 s)
def test_fewcols_warps_along_k_seeds_compile_in_both_layouts_without_spills(h100):
    """fewcols with WK warps of a block along K: its seeds build for B stored K x N and N x K with
    no spills and the shared memory they declare (B's chunk, the warps' sums and the last block's
    flag; with A_STAGES the ring of A too, as dynamic shared memory); WK = 1 renders no such
    buffer, a block above 1024 threads is refused, and lanes along K take whole 128-float steps of
    a chunk per warp."""
    fam = Family.load("fewcols")
    deep = [c for c in Space.load("fewcols").seeds if c["WK"] > 1]
    assert {c["NR"] for c in deep} >= {1, 8, 16} and {c["LANE_ROWS"] for c in deep} == {0, 1}
    for cfg in deep:
        for trans_b in (0, 1):
            resolved = fam.resolve({**cfg.as_dict(), "TRANS_B": trans_b})
            env = resolved.env
            assert env["THREADS"] == 32 * env["WARPS"] * env["WK"] and not fam.violations(resolved, h100)
            source = render(resolved)
            assert "red[" in source and "__syncthreads();" in source
            res = compile_source(source, "sm_90", DEFAULT_KERNEL).resources
            assert res.spill_bytes == 0 and res.registers * env["THREADS"] <= h100.regs_per_block, (cfg.name, res)
            if env["A_STAGES"]:  # all of it dynamic, as the launch asks; only last_block's flag is static
                static = 16 if env["REDUCE"] == "last_block" else 0
                assert res.smem_static_bytes == static and resolved.plan.dynamic_smem == env["SMEM_BYTES"], cfg.name
            else:
                assert res.smem_static_bytes == env["SMEM_BYTES"], (cfg.name, trans_b, res)
    flat = {**deep[0].as_dict(), "WK": 1}
    assert "red[" not in render(fam.resolve(flat))
    too_many = Config.make("fewcols", {**flat, "WARPS": 8, "WK": 8})
    assert any("threads 2048" in v for v in fam.violations(too_many, h100))
    # Lanes along K: 4 warps along K, each a whole 128-float step of a chunk (512 floats, not 256).
    point = dict(NR=4, RPW=2, WARPS=2, WK=4, UNROLL=2, STREAM=1)
    assert fam.broken_rules(Config.make("fewcols", {**point, "KCHUNK": 256}))
    assert not fam.broken_rules(Config.make("fewcols", {**point, "KCHUNK": 512}))


@EVERY
def test_fewcols_b_through_the_ring_frees_the_chunk_from_shared_memory(h100, every):
    """fewcols with B's rows through A's ring (B_RING): the seeds and the GPU test's points build in
    both layouts with no spills; the shared memory they declare is the launch's (all dynamic) and
    does not grow with KCHUNK, so a chunk of 16384 fits where without B_RING it does not; and
    B_RING needs A's ring."""
    fam = Family.load("fewcols")
    seeds = [c.as_dict() for c in Space.load("fewcols").seeds if c["B_RING"]]
    assert {c["NR"] for c in seeds} >= {8, 16, 32} and max(c["KCHUNK"] for c in seeds) == 16384
    points = [
        (16, 1, 2, 4, 16384, 1, 3),
        (16, 1, 1, 8, 8192, 2, 4),
        (8, 1, 2, 4, 1024, 1, 4),
        (32, 2, 1, 4, 4096, 1, 2),
    ]
    points += [(4, 2, 2, 2, 256, 2, 3)]
    keys = ("NR", "RPW", "WARPS", "WK", "KCHUNK", "UNROLL", "A_STAGES")
    base = dict(LANE_ROWS=1, B_RING=1, STREAM=1)
    for params in some(seeds + [base | dict(zip(keys, p, strict=True)) for p in points], every):
        for trans_b, reduce in ((0, "atomic"), (1, "last_block")):
            resolved = fam.resolve({**params, "TRANS_B": trans_b, "REDUCE": reduce})
            assert not fam.violations(resolved, h100), resolved.config.name
            res = compile_source(render(resolved), "sm_90", DEFAULT_KERNEL).resources
            assert res.spill_bytes == 0, (resolved.config.name, res)
            assert resolved.plan.dynamic_smem == resolved.env["SMEM_BYTES"]
            assert res.smem_static_bytes == (16 if reduce == "last_block" else 0)
    deep = {**seeds[0], "KCHUNK": 16384}
    assert fam.resolve(deep).env["SMEM_BYTES"] == fam.resolve({**deep, "KCHUNK": 256}).env["SMEM_BYTES"]
    assert any("smem_bytes" in v for v in fam.violations(fam.resolve({**deep, "B_RING": 0}), h100))
    assert fam.broken_rules(Config.make("fewcols", {**deep, "A_STAGES": 0}))


FEWCOLS_BEFORE_B_RING = "d0e22c0"


def test_fewcols_without_b_through_the_ring_renders_the_source_of_before(tmp_path):
    """B_RING = 0 renders, character for character, the source the template gave before B_RING
    (so records measured before it keep their source hash), for the seeds, the stored configs and
    random valid points of the space of before."""
    import json
    import random

    old, new = _family_at(FEWCOLS_BEFORE_B_RING, "fewcols", tmp_path), Family.load("fewcols")
    configs = [c.as_dict() for c in Space.load("fewcols").seeds if not c["B_RING"]]
    for path in sorted((ROOT / "tests" / "data").rglob("*.json")) + sorted((ROOT / "results").rglob("*.json")):
        entry = json.loads(path.read_text()).get("families", {}).get("fewcols")
        if isinstance(entry, dict) and "config" in entry:
            configs.append(entry["config"]["params"])
    values = dict(Space.load("fewcols").values)
    values["KCHUNK"] = [k for k in values["KCHUNK"] if k <= 4096]
    rng, drawn = random.Random(3), 0
    while drawn < 150:
        point = {name: rng.choice(vals) for name, vals in values.items() if name != "B_RING"}
        point["TRANS_B"] = rng.choice([0, 1])
        if not old.broken_rules(Config.make("fewcols", point)):
            configs.append(point)
            drawn += 1
    for params in configs:
        before = {k: v for k, v in params.items() if k != "B_RING"}
        assert render(new.resolve({**before, "B_RING": 0})) == render(old.resolve(before)), params


# fewcols' template before its warps along K (WK): with WK = 1 the family builds that kernel.
def _family_at(commit: str, family: str, folder) -> Family:
    """A family as its template was at `commit` of this checkout (skips without git or history)."""
    import subprocess

    try:
        before = subprocess.run(
            ["git", "show", f"{commit}:templates/{family}.cu.j2"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"needs git and commit {commit} of this checkout")
    (folder / f"{family}.cu.j2").write_text(before)
    return Family.load(family, folder)


FEWCOLS_BEFORE_WK = "578abe9"


@pytest.mark.skipif(find_cuobjdump() is None, reason="needs cuobjdump")
@EVERY
def test_fewcols_one_warp_along_k_builds_the_kernel_before_wk(tmp_path, every):
    """fewcols with WK = 1 is the kernel the family built before WK, instruction for instruction
    (branch targets aside, as in the PACKB 2 comparison), for every seed in both layouts with both
    reductions: what was measured before WK still describes it. Needs the checkout's history."""
    old, new = _family_at(FEWCOLS_BEFORE_WK, "fewcols", tmp_path), Family.load("fewcols")
    assert "WK" not in old.params and new.params["WK"].default == 1
    flat = [c for c in Space.load("fewcols").seeds if c["WK"] == 1]
    assert len(flat) >= 8 and {c["LANE_ROWS"] for c in flat} == {0, 1}
    # By default a seed of each LANE_ROWS, in one layout and reduction each; `every`: all of them.
    firsts = [next(c for c in flat if c["LANE_ROWS"] == lr) for lr in (0, 1)]
    combos = [(firsts[0], 0, "atomic"), (firsts[1], 1, "last_block")]
    combos += [(c, t, r) for c in flat for t in (0, 1) for r in ("atomic", "last_block") if (c, t, r) not in combos]
    for seed, trans_b, reduce in some(combos, every, n=2):
        # Parameters added since (WK, A_STAGES) at their defaults: the kernel of before.
        later = {k: v for k, v in seed.as_dict().items() if k not in old.params}
        assert later == {k: new.params[k].default for k in later}, seed.name
        params = {k: v for k, v in seed.as_dict().items() if k in old.params} | {"TRANS_B": trans_b, "REDUCE": reduce}
        was, _ = _sass(params, family=old)
        now, _ = _sass({**params, **later}, family=new)
        same = _without_branch_targets(was) == _without_branch_targets(now)
        assert len(now) > 1000 and same, (seed.name, trans_b, reduce)


@pytest.mark.parametrize("reduce", ["atomic", "last_block"])
def test_fewrows_largest_shared_memory_point_compiles_to_what_it_declares(reduce, h100):
    """The static filter admits fewrows points up to 48 KB of SMEM_BYTES; the largest of each
    REDUCE must build with exactly that much static shared memory (last_block's flag included:
    left out, 1,204 admitted points were refused by ptxas at 48 KB + 16 bytes)."""
    fam = Family.load("fewrows")
    sp = Space.load("fewrows").for_problem(Problem(8, 4096, 4096))
    points = [c for c in sp.enumerate(h100).valid if c["REDUCE"] == reduce]
    top = max(points, key=lambda c: fam.derive(c.as_dict())["SMEM_BYTES"])
    resolved = fam.resolve(top)
    assert resolved.env["SMEM_BYTES"] > 32 * 1024  # a large point, near the rule
    res = compile_source(render(resolved), "sm_90", DEFAULT_KERNEL).resources
    assert res.smem_static_bytes == resolved.env["SMEM_BYTES"], (top.name, res)


FEWROWS_BEFORE_WK = "84e737c"  # fewrows' template before warps along K (7447bef) and AK (cf116fc)


@EVERY
def test_fewrows_one_warp_along_k_builds_the_kernel_before_wk(tmp_path, every):
    """fewrows with WK = 1 (and A's chunk row-major, AK = 0) is the kernel the family built before
    WK, instruction for instruction (branch targets aside), for its one-warp-along-K seeds in both
    layouts with both reductions: what was measured before WK still describes it. Needs the
    checkout's history."""
    old, new = _family_at(FEWROWS_BEFORE_WK, "fewrows", tmp_path), Family.load("fewrows")
    assert "WK" not in old.params and "AK" not in old.params and new.params["WK"].default == 1
    flat = [c for c in Space.load("fewrows").seeds if c["WK"] == 1 and c["AK"] == 0]
    assert len(flat) >= 6 and {c["MR"] for c in flat} >= {1, 2, 4, 8, 16}
    # By default the first seed in each layout, one reduction each; `every`: all of them.
    combos = [(flat[0], 0, "atomic"), (flat[0], 1, "last_block")]
    combos += [(c, t, r) for c in flat for t in (0, 1) for r in ("atomic", "last_block") if (c, t, r) not in combos]
    for seed, trans_a, reduce in some(combos, every, n=2):
        params = {k: v for k, v in seed.as_dict().items() if k not in ("WK", "AK")}
        params |= {"TRANS_A": trans_a, "REDUCE": reduce}
        was, _ = _sass(params, family=old)
        now, _ = _sass({**params, "WK": 1, "AK": 0}, family=new)
        same = _without_branch_targets(was) == _without_branch_targets(now)
        assert len(now) > 300 and same, (seed.name, trans_a, reduce)


def test_one_process_builds_an_entry_that_others_want_at_the_same_time(monkeypatch):
    """Workers that want one kernel at once (the GPU suite's shards) build it once: the others
    wait on the entry's lock and read what the first stored."""
    import threading
    import time

    from autotune.gpu import compile as compile_mod

    real, builders = compile_mod._nvrtc_compile, set()

    def slow_compile(*args):
        builders.add(threading.get_ident())
        time.sleep(0.5)  # both callers are inside compile_source before the first one stores
        return real(*args)

    monkeypatch.setattr(compile_mod, "_nvrtc_compile", slow_compile)
    source = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 7919.0f; }'  # no other test's
    out = [None, None]

    def one(i):
        out[i] = compile_source(source, "sm_90", "k")

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builders) == 1
    assert out[0].cubin == out[1].cubin and sorted([out[0].cached, out[1].cached]) == [False, True]


def test_a_planted_lock_never_blocks_nor_stops_a_build(tmp_path):
    """The lock is only a saving: a FIFO, a link or a folder at its path, or a lock held past the
    wait, and the caller builds anyway."""
    import fcntl
    import time

    from autotune.core.cachedir import entry_lock

    os_fifo = tmp_path / "fifo.lock"
    os.mkfifo(os_fifo)
    (tmp_path / "link.lock").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "dir.lock").mkdir()
    for name in ("fifo.lock", "link.lock", "dir.lock"):
        with entry_lock(tmp_path / name, wait_s=1):
            pass
    assert not (tmp_path / "elsewhere").exists()
    held = os.open(tmp_path / "held.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)
    t0 = time.monotonic()
    with entry_lock(tmp_path / "held.lock", wait_s=0.3):
        pass
    assert time.monotonic() - t0 < 30  # it gave up waiting (a hang guard, not a speed test)
    os.close(held)
