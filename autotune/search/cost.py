"""A static cost model: how fast a config should run, from what is known before compiling it.

Where a family has no seeds (`search --no-seeds`, a GPU nobody has tuned for), it ranks the
points instead of TPE's random start-up: the start-up is the best-ranked points of distinct tile
shapes, and the neighbour phase tries the best-ranked neighbours first. It only orders
candidates; every one is still compiled, verified and timed, and nothing is pruned on its word.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.types import Config, Problem
from ..kernels.limits import DeviceLimits

# Why rank: TPE's random start-up draws from a space of up to 600,000 valid points, of which a few
# dozen are within 5% of the best; the search then spends its budget climbing from there.
#
# The estimate (relative; 1.0 is the FFMA peak) is a product of terms, each a known way an
# FFMA-pipe SGEMM loses throughput (see `_estimate`), read from what the family's YAML declares
# (`model:`, kernels/tiles.py), its THREADS and SMEM_BYTES, and the device's limits (threads and
# blocks an SM holds among them), so it carries to GPUs that were never measured. A family that
# declares no `cost` (tensor-core products, whose issue model this is not; threads that share K
# out, as tiny's groups) gets no estimate, and its start-up stays random.
#
# The constants were chosen on one landscape (warptile at 2048^3 on the H100: 1016 sampled points,
# benchmarks/landscape.py, in git at 5ca3e14) and checked on two others (4096^3, 8192x8192x1024); see notes/search.md.

STAGE_COST = 40  # instructions per thread per pipeline stage besides FFMAs, fragment reads, copies
FULL_WARPS = 8  # warps per SM past which more hide no more latency
SPLIT_BALANCE = 21  # FLOPs per byte of memory bandwidth (H100: 67 TFLOP/s over 3.2 TB/s)
L2_FMA_PER_BYTE = 4  # FMAs an L2 byte feeds at full FFMA rate
SPILL_MARGIN, SPILL_WIDTH = 18, 7  # registers spare at which half the configs spill, and the spread
SCORED = 50_000  # points scored for the start-up (a seeded sample of larger spaces)


def inputs(family, env: Mapping[str, Any]) -> dict[str, Any]:
    """Return what the estimate reads of a config (`env`: its params and derived values).

    The family must declare `cost`. Its declared values are read, and for those left out their
    defaults: a square thread tile; a 16-byte copy for every four floats of the stage's tiles; no
    registers past the accumulators and fragments; one block an SM in the launch bounds; no split
    of K or tail.
    """
    declared = family.model.cost_of(env)
    rows, cols = family.model.tile_of(env)
    threads, k_step = env["THREADS"], declared["k_step"]
    square = math.sqrt(rows * cols / threads)
    acc_m, acc_n = declared.get("thread_tile", (square, square))
    return {
        "rows": rows,
        "cols": cols,
        "k_step": k_step,
        "threads": threads,
        "acc_m": acc_m,
        "acc_n": acc_n,
        "min_blocks": declared.get("min_blocks", 1),
        "split_k": declared.get("split_k", 1),
        "variant": declared.get("variant"),
        # the above: the start-up's tile shape (`startup`); below, what else the estimate reads
        "copies": declared.get("copies", (rows + cols) * k_step / (4 * threads)),
        "registers": declared.get("registers", 0),
        "split_tail": bool(declared.get("split_tail", 0)),
        "smem": env["SMEM_BYTES"],
    }


# What the model reads of a config's tiling: configs that agree on these differ only in what it
# cannot see (FMA order, group size, stages, padding, ...), so the start-up takes one of each.
SHAPE_KEYS = ("rows", "cols", "k_step", "threads", "acc_m", "acc_n", "min_blocks", "split_k", "variant")


def estimate(family, env: Mapping[str, Any], problem: Problem, limits: DeviceLimits) -> float:
    """Predict the throughput of a config (`env`) of `family` as a share of the FFMA peak.

    Only the order between configs matters; the family must declare `cost` (`applies`).
    """
    return _estimate(inputs(family, env), problem, limits)


def _estimate(x: Mapping[str, Any], problem: Problem, limits: DeviceLimits) -> float:
    """Return the product of the terms below for the inputs `x`."""
    m, n, k = problem.M, problem.N, problem.K
    # Issue: the share of a k-step's instructions that are FFMAs, against shared-memory fragment
    # reads (16-byte), global-to-shared copies and a fixed per-stage cost (barrier, waits, loop).
    threads, bm, bn, bk = x["threads"], x["rows"], x["cols"], x["k_step"]
    acc = bm * bn / threads
    acc_m, acc_n = x["acc_m"], x["acc_n"]
    copies = x["copies"]
    ffma = bk * acc
    issue = ffma / (ffma + bk * (acc_m + acc_n) / 4 + 2 * copies + STAGE_COST)

    # Occupancy: warps per SM from registers (estimated), shared memory and threads, the gain
    # flattening off above FULL_WARPS (the thread tile's independent FFMAs hide the rest).
    minb, splitk = x["min_blocks"], x["split_k"]
    split = x["split_tail"]
    cap = min(limits.max_regs_per_thread, limits.regs_per_sm // (threads * minb))
    regs = math.ceil(min(cap, acc + 64) / 8) * 8
    smem = x["smem"]
    blocks = min(
        limits.regs_per_sm // (threads * regs),
        limits.smem_per_sm // (smem + 1024) if smem else limits.blocks_per_sm,
        limits.threads_per_sm // threads,
        limits.blocks_per_sm,
    )
    blocks = max(1, blocks)
    occupancy = min(1.0, blocks * threads / 32 / FULL_WARPS) ** 0.25

    # Waves: the last wave's idle SMs for a grid of whole tiles (the split and stream-K schedules
    # share out the tail: 0.97 at worst), and the padding of tiles past M and N.
    tiles = math.ceil(m / bm) * math.ceil(n / bn) * splitk
    slots = limits.sm_count * blocks
    waves = tiles / (math.ceil(tiles / slots) * slots)
    if split:
        waves = max(waves, 0.97)
    padding = m * n / (math.ceil(m / bm) * bm * math.ceil(n / bn) * bn)
    # Split-K: the partial sums' extra traffic through memory, against the depth K that pays it.
    splitting = 1 / (1 + 4 * (splitk - 1) * SPLIT_BALANCE / k)
    # L2: global traffic per FMA of the block tile, against an L2 that serves about 4 FMAs a byte.
    l2 = 1 / max(1.0, L2_FMA_PER_BYTE * 4 * (1 / bm + 1 / bn))

    # Spills: the chance that ptxas spills under the launch bounds' register cap, from the
    # accumulators plus fragments, copies and schedule state (a spilled config is rejected).
    need = acc + acc_m + acc_n + x["registers"]
    need += 12 * (splitk > 1) + 6 * split
    no_spill = 1 / (1 + math.exp(-(cap - need - SPILL_MARGIN) / SPILL_WIDTH))
    return issue * occupancy * waves * padding * splitting * l2 * no_spill


def applies(family, valid: Sequence[Config]) -> bool:
    """Say whether the model ranks this family's points: it declares `cost` in its `model:`."""
    return bool(valid) and family.model is not None and family.model.cost is not None


def startup(
    family, valid: Sequence[Config], problem: Problem, limits: DeviceLimits, count: int, seed: int
) -> list[Config]:
    """Return the `count` best-estimated configs of distinct tile shapes (SHAPE_KEYS).

    Ties are broken by a seeded shuffle; [] when the model does not apply to the family.
    """
    if not applies(family, valid):
        return []
    rng = random.Random(seed)
    pool = list(valid) if len(valid) <= SCORED else rng.sample(list(valid), SCORED)
    rng.shuffle(pool)
    scored = []
    for cfg in pool:
        x = inputs(family, family.derive(cfg.as_dict()))
        scored.append((_estimate(x, problem, limits), tuple(x[k] for k in SHAPE_KEYS), cfg))
    scored.sort(key=lambda s: -s[0])  # stable: the shuffle breaks ties
    seen, out = set(), []
    for _, shape, cfg in scored:
        if shape not in seen:
            seen.add(shape)
            out.append(cfg)
            if len(out) == count:
                break
    return out
