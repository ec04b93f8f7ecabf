"""What the models read of a family, declared in its YAML (`model:`, autotune/kernels/tiles.py):
the dispatch model and the static cost model read the declared tile and cost inputs and the
profile's threads and blocks per SM, not parameter names and H100 literals. No GPU."""

import dataclasses
import math
import random

import pytest

from autotune.core.types import Config, Problem, UserError
from autotune.dispatch import model
from autotune.kernels.family import Family, known_families
from autotune.kernels.limits import load_profile
from autotune.kernels.space import Space
from autotune.search import cost

SHAPES = [Problem(1024, 1024, 1024), Problem(4096, 16, 4096), Problem(300, 4097, 700), Problem(1, 4096, 4096)]
ROOF = model.Roof(3e9, 50e9)


# ---- the models as they read names before families declared their tile (the reference) ---------


def _guessed_tile(env):
    """The tile the dispatch model guessed from parameter names: BM/TILE/MR rows, BN/TILE/NR columns."""
    return int(env.get("BM", env.get("TILE", env.get("MR", 1)))), int(env.get("BN", env.get("TILE", env.get("NR", 1))))


def _guessed_slots(plan, registers, smem, limits):
    """model.slots with the H100's 2048 threads and 32 blocks an SM written in."""
    warps = -(-plan.block // 32)
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    by_regs = (limits["regs_per_sm"] // per_warp) // warps
    by_smem = limits["smem_per_sm"] // (smem + 1024)
    return max(min(32, 2048 // plan.block, by_regs, by_smem), 1) * limits["sm_count"]


def _guessed_scorable(env):
    return all(k in env for k in ("BM", "BN", "THREADS")) and "PRECISION" not in env and "KS" not in env


def _guessed_estimate(env, problem, limits):
    """search/cost.estimate as it read names (BM, BN, ACC_M, B_LOADS4, SPLITK, ...) and the H100's literals."""
    m, n, k = problem.M, problem.N, problem.K
    threads, bm, bn, bk = env["THREADS"], env["BM"], env["BN"], env.get("BK", 8)
    acc = bm * bn / threads
    acc_m, acc_n = env.get("ACC_M", math.sqrt(acc)), env.get("ACC_N", math.sqrt(acc))
    both = "A_LOADS" in env and "B_LOADS4" in env
    copies = env["A_LOADS"] + env["B_LOADS4"] if both else (bm + bn) * bk / (4 * threads)
    ffma = bk * acc
    issue = ffma / (ffma + bk * (acc_m + acc_n) / 4 + 2 * copies + cost.STAGE_COST)
    minb, splitk = env.get("MINB", 1), env.get("SPLITK", 1)
    split = env.get("SCHEDULE", "data_parallel") != "data_parallel"
    cap = min(limits.max_regs_per_thread, limits.regs_per_sm // (threads * minb))
    regs = math.ceil(min(cap, acc + 64) / 8) * 8
    smem = env.get("SMEM_BYTES", 0)
    blocks = min(
        limits.regs_per_sm // (threads * regs), limits.smem_per_sm // (smem + 1024) if smem else 32, 2048 // threads, 32
    )
    blocks = max(1, blocks)
    occupancy = min(1.0, blocks * threads / 32 / cost.FULL_WARPS) ** 0.25
    tiles = math.ceil(m / bm) * math.ceil(n / bn) * splitk
    slots = limits.sm_count * blocks
    waves = tiles / (math.ceil(tiles / slots) * slots)
    if split:
        waves = max(waves, 0.97)
    padding = m * n / (math.ceil(m / bm) * bm * math.ceil(n / bn) * bn)
    splitting = 1 / (1 + 4 * (splitk - 1) * cost.SPLIT_BALANCE / k)
    l2 = 1 / max(1.0, cost.L2_FMA_PER_BYTE * 4 * (1 / bm + 1 / bn))
    need = acc + acc_m + acc_n + 8 * env.get("B_LOADS4", 0) + env.get("A_LOADS", 0)
    need += 10 * env.get("PREFETCH", 0) + 12 * (splitk > 1) + 6 * split
    no_spill = 1 / (1 + math.exp(-(cap - need - cost.SPILL_MARGIN) / cost.SPILL_WIDTH))
    return issue * occupancy * waves * padding * splitting * l2 * no_spill


def _configs(space, limits, n=30):
    valid = space.enumerate(limits).valid
    return [space.fallback, *space.seeds, *random.Random(0).sample(valid, min(n, len(valid)))]


@pytest.mark.parametrize("profile", ["h100", "h200"])
# The families the name-reading models knew (panel, declared later, has no cost model by design).
@pytest.mark.parametrize("family", [f for f in known_families() if f != "panel"])
def test_on_the_h100_and_h200_the_models_give_what_they_gave_from_names(family, profile):
    """Every family's declared tile is the one its names gave, the profile's threads and blocks
    an SM are the literals the models had, and so slots, predictions, estimates and whether the
    cost model applies are the same to the last bit, at seeds, fallback and a sample of points."""
    limits = load_profile(profile)
    space = Space.load(family)
    fam = space.family
    assert cost.applies(fam, [space.fallback]) == _guessed_scorable(fam.derive(space.fallback.as_dict()))
    for i, cfg in enumerate(_configs(space, limits)):
        r = fam.resolve(cfg)
        assert r.plan.tile == _guessed_tile(r.env), cfg.name
        registers, smem = 32 + 8 * (i % 28), r.env["SMEM_BYTES"]
        slots = model.slots(r.plan, registers, smem, limits.to_dict())
        assert slots == _guessed_slots(r.plan, registers, smem, limits.to_dict())
        c = model.Candidate(SHAPES[0], r.plan, r.plan, 1.0, slots, limits.sm_count, None)
        guessed = dataclasses.replace(r.plan, tile=_guessed_tile(r.env))
        old = model.Candidate(SHAPES[0], guessed, guessed, 1.0, slots, limits.sm_count, None)
        assert [c.predict_ms(p, ROOF) for p in SHAPES] == [old.predict_ms(p, ROOF) for p in SHAPES]
        if cost.applies(fam, [cfg]):
            assert [cost.estimate(fam, r.env, p, limits) for p in SHAPES] == [
                _guessed_estimate(r.env, p, limits) for p in SHAPES
            ], cfg.name


@pytest.mark.parametrize("family", ["coarse2d", "vectorized"])
def test_the_startup_is_the_one_names_gave(family, h100):
    """The start-up's distinct tile shapes are the declared values where names were read
    (BM, BN, BK, THREADS, ACC_M, ACC_N, MINB, SPLITK, SCHEDULE): the same picks, in order."""
    space = Space.load(family).without_seeds()
    valid, fam, problem = space.enumerate(h100).valid, space.family, SHAPES[0]
    rng = random.Random(1)
    pool = list(valid)
    rng.shuffle(pool)
    keys = ("BM", "BN", "BK", "THREADS", "ACC_M", "ACC_N", "MINB", "SPLITK", "SCHEDULE")
    scored = []
    for cfg in pool:
        env = fam.derive(cfg.as_dict())
        scored.append((_guessed_estimate(env, problem, h100), tuple(env.get(k) for k in keys), cfg))
    scored.sort(key=lambda s: -s[0])
    seen, old = set(), []
    for _, shape, cfg in scored:
        if shape not in seen and len(old) < 10:
            seen.add(shape)
            old.append(cfg)
    assert cost.startup(fam, valid, problem, h100, 10, 1) == old


def test_the_a10s_threads_and_blocks_an_sm_are_its_own():
    """The A10 holds 1,536 threads and 16 blocks an SM, not the H100's 2,048 and 32: a block of
    256 threads fits 6 times, not 8, and a 32-thread block 16 times, not 25 (its registers' cap),
    so a grid of 1,800 such blocks is one wave on the H100's numbers and 1.56 on the A10's."""
    a10 = load_profile("a10")
    assert (a10.threads_per_sm, a10.blocks_per_sm) == (1536, 16)
    as_h100 = dataclasses.replace(a10, threads_per_sm=2048, blocks_per_sm=32)
    plan = Family.load("warptile").resolve({**Space.load("warptile").fallback.as_dict()}).plan
    assert plan.block == 256
    assert model.slots(plan, 32, 0, a10.to_dict()) == 6 * 72
    assert model.slots(plan, 32, 0, as_h100.to_dict()) == 8 * 72
    old_record = {k: v for k, v in a10.to_dict().items() if k not in ("threads_per_sm", "blocks_per_sm")}
    assert model.slots(plan, 32, 0, old_record) == 8 * 72  # stored before the fields: the H100's
    coarse = Space.load("coarse1d").family
    env = coarse.derive({"BM": 32, "BN": 16, "BK": 16, "TM": 16})  # 32 threads
    assert env["THREADS"] == 32
    one_wave = Problem(32 * 40, 16 * 45, 1024)  # 1,800 tiles: 72 SMs x 25 blocks
    ratio = cost.estimate(coarse, env, one_wave, a10) / cost.estimate(coarse, env, one_wave, as_h100)
    assert ratio == pytest.approx(1800 / (2 * 72 * 16))


# ---- a family nobody wrote code for -----------------------------------------------------------

TEMPLATE = """{#- autotune
description: A tile of C a block, its rows and columns named unlike any shipped family's.
params:
  ROWS_PER_CTA: {domain: [8, 256], doc: "rows of C a block"}
  COLS_PER_CTA: {domain: [8, 256], doc: "columns of C a block"}
  DEPTH: {domain: [4, 64], doc: "k a stage"}
  CELLS: {domain: [1, 64], doc: "outputs a thread"}
  MODE: {choices: [plain, fancy], default: plain}
derived:
  THREADS: ROWS_PER_CTA * COLS_PER_CTA // CELLS
  SMEM_BYTES: 4 * DEPTH * (ROWS_PER_CTA + COLS_PER_CTA)
constraints:
  - {expr: "(ROWS_PER_CTA * COLS_PER_CTA) % CELLS == 0", why: "whole threads"}
launch:
  threads: THREADS
  grid: ["cdiv(N, COLS_PER_CTA)", "cdiv(M, ROWS_PER_CTA)", "1"]
-#}
{% include "_common.cuh.j2" %}
extern "C" __global__ void {{ KERNEL_NAME }}(int M, int N, int K, float alpha, const float* A, int lda,
                                             const float* B, int ldb, float beta, float* C, int ldc) {}
"""
SPACE = """family: slab
model:
  tile: [{tile}]
  cost: {{k_step: DEPTH}}
space:
  ROWS_PER_CTA: [32, 64, 128]
  COLS_PER_CTA: [32, 64, 128]
  DEPTH: [8, 16]
  CELLS: [16, 32]
fallback: {{ROWS_PER_CTA: 64, COLS_PER_CTA: 64, DEPTH: 8, CELLS: 16}}
"""


@pytest.fixture
def slab(tmp_path, monkeypatch):
    """A family in a template folder of its own (AUTOTUNE_TEMPLATES); write(tile) (re)writes its YAML."""
    (tmp_path / "slab.cu.j2").write_text(TEMPLATE)
    monkeypatch.setenv("AUTOTUNE_TEMPLATES", str(tmp_path))

    def write(tile="ROWS_PER_CTA, COLS_PER_CTA", text=None):
        (tmp_path / "slab.yaml").write_text(text if text is not None else SPACE.format(tile=tile))
        return tmp_path / "slab.yaml"

    write()
    return write


def _slab_numbers(config, limits):
    """The slab config's plan tile, its estimate and its prediction at other shapes."""
    space = Space.load("slab")
    r = space.family.resolve(config)
    at = Problem(1024, 1024, 1024)
    slots = model.slots(r.plan, 64, r.env["SMEM_BYTES"], limits.to_dict())
    c = model.Candidate(at, r.plan, r.plan, 1.0, slots, limits.sm_count, None)
    est = [cost.estimate(space.family, r.env, p, limits) for p in SHAPES]
    return r.plan.tile, est, [c.predict_ms(p, ROOF) for p in SHAPES]


def test_a_new_family_is_modelled_by_the_tile_its_yaml_declares(slab, h100):
    """No name of the family is one the models once guessed from (a tile of one, no estimate);
    with its YAML's tile the cost and the prediction follow that tile, and a YAML that declares
    another tile for the same template changes both, no code edited."""
    fam = Family.load("slab")
    assert not set(fam.params) & {"BM", "BN", "TILE", "MR", "NR"}
    cfg = {"ROWS_PER_CTA": 64, "COLS_PER_CTA": 128, "DEPTH": 8, "CELLS": 32}
    tile, est, pred = _slab_numbers(cfg, h100)
    assert tile == (64, 128)
    assert _guessed_tile(fam.derive(cfg)) == (1, 1)
    smaller, est_small, pred_small = _slab_numbers({**cfg, "COLS_PER_CTA": 32}, h100)
    assert smaller == (64, 32) and est_small != est and pred_small != pred
    space = Space.load("slab").without_seeds()
    picks = cost.startup(space.family, space.enumerate(h100).valid, SHAPES[0], h100, 4, 1)
    assert len(picks) == 4  # the cost model ranks its start-up
    slab("2 * ROWS_PER_CTA, COLS_PER_CTA")  # the same template, another declared tile
    doubled, est_doubled, pred_doubled = _slab_numbers(cfg, h100)
    assert doubled == (128, 128)
    assert est_doubled != est and pred_doubled != pred


@pytest.mark.parametrize(
    ("model_text", "message"),
    [
        ("", r"slab\.yaml: no 'model' section: declare what the models read"),
        ("model: [1, 2]\n", r"slab\.yaml:2: the model section must be a mapping"),
        ("model: {tile: [ROWS_PER_CTA, COLS_PER_CTA], tiles: 1}\n", r"slab\.yaml:2: unknown key 'tiles' in the model"),
        ("model: {cost: {k_step: DEPTH}}\n", r"slab\.yaml:2: the model section needs 'tile'"),
        ("model: {tile: [ROWS_PER_CTA]}\n", r"slab\.yaml:2: tile must be \[rows, columns\]"),
        ("model: {tile: [BM, BN]}\n", r"slab\.yaml:2: model tile reads 'BM', not a parameter or derived value"),
        ("model: {tile: [MODE, COLS_PER_CTA]}\n", r"slab\.yaml:2: model tile is MODE, a named choice, not a number"),
        ("model: {tile: [ROWS_PER_CTA +, 1]}\n", r"slab\.yaml:2: model tile: cannot parse"),
        ("model: {tile: [1.5, 1]}\n", r"slab\.yaml:2: model tile must be an expression, got 1\.5"),
        ("model: {tile: [1, 1], cost: {}}\n", r"slab\.yaml:2: the model's cost section needs 'k_step'"),
        ("model: {tile: [1, 1], cost: {k_step: 8, warps: 4}}\n", r"slab\.yaml:2: unknown key 'warps' in the model's"),
    ],
)
def test_a_model_section_that_is_wrong_is_one_line_when_the_family_loads(slab, model_text, message):
    body = SPACE.format(tile="1, 1").split("space:", 1)[1]
    slab(text="family: slab\n" + model_text + "space:" + body)
    with pytest.raises(UserError, match=message):
        Family.load("slab")


def test_a_model_value_that_is_no_number_at_a_config_is_one_line_when_the_space_loads(slab):
    """Types the names cannot tell: `MODE + 1` parses, and fails at the fallback."""
    slab("MODE + 1, COLS_PER_CTA")
    Family.load("slab")
    with pytest.raises(UserError, match=r"slab\.yaml:2: model tile 'MODE \+ 1' cannot be evaluated"):
        Space.load("slab")
    slab('MODE == "plain", COLS_PER_CTA')  # a comparison is 0 or 1: a number
    assert Space.load("slab").family.resolve(Space.load("slab").fallback).plan.tile == (1, 64)


def test_a_space_file_keeps_the_familys_model(slab, tmp_path):
    """Another space file may carry the family's `model:` (a copy of its YAML) but not another
    one: the models read the family's own."""
    copy = tmp_path / "copy.yaml"
    copy.write_text(SPACE.format(tile="ROWS_PER_CTA, COLS_PER_CTA"))
    assert Space.load("slab", copy).family.model is not None
    copy.write_text(SPACE.format(tile="COLS_PER_CTA, ROWS_PER_CTA"))
    with pytest.raises(UserError, match=r"copy\.yaml:2: model differs from family slab's own .*slab\.yaml"):
        Space.load("slab", copy)
    alone = tmp_path / "alone.yaml"
    alone.write_text("space: {ROWS_PER_CTA: [64], COLS_PER_CTA: [64], DEPTH: [8], CELLS: [16]}\n")
    assert Space.load("slab", alone).values["DEPTH"] == [8]  # a space alone needs none


def test_a_family_without_a_yaml_gets_no_estimate_and_no_prediction(tmp_path, h100):
    """A template with no YAML (no space to search either): no tile on its plans, so the cost
    model does not rank it and the dispatch model says why it cannot predict, not a tile of one."""
    (tmp_path / "bare.cu.j2").write_text(TEMPLATE)
    fam = Family.load("bare", tmp_path)
    cfg = Config.make("bare", {"ROWS_PER_CTA": 64, "COLS_PER_CTA": 64, "DEPTH": 8, "CELLS": 16})
    plan = fam.resolve(cfg).plan
    assert fam.model is None and plan.tile is None
    assert not cost.applies(fam, [cfg])
    with pytest.raises(UserError, match="declares no tile"):
        model.busiest_sm(plan, SHAPES[0], 1, 132)
