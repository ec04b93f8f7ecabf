"""Predict which stored kernel runs fastest at a shape nobody tuned.

Every stored entry (each family's best at each tuned shape of the layout) is a candidate: its
measured time is carried to the new shape by a model of how its launch scales (occupancy, work of
the busiest SM, a roofline, the cost of each launch, trust falling with distance), and the fastest
prediction wins. A prediction is a ranking aid, not a measurement: `autotune search` at the shape
is the answer when it matters, and the choice is logged as "predicted for ..." in the kernel's
source.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..core.types import Problem, UserError
from ..kernels.launch import Geometry, LaunchPlan
from ..kernels.limits import resident_per_sm

# Why every candidate, not the nearest tuned shape's winner: that winner can be far from the best
# elsewhere. A 128 x 256 tile tuned at 4096^3 leaves most of the GPU idle at 256 x 256 x 16384
# (two tiles), and a kernel tuned to stream one row of A is no use at 1024^3.
#
# SHARING, DISTANCE_WEIGHT and LAUNCH_US were chosen on the "fit" shapes of
# benchmarks/candidates.py (every stored config timed at shapes nobody tuned; 40 of them, odd sizes
# and row or column counts that no tile divides among them) for the best geometric mean of the
# chosen kernel against cuBLAS, and are reported on its "score" and "check" shapes;
# benchmarks/judge_model.py redoes that from the timings on the CPU (both in git at ca4e8c0),
# notes/performance.md has the figures.
REG_ALLOC_UNIT = 256  # registers are given to a warp in units of 256
SMEM_RESERVED = 1024  # bytes the runtime keeps per block (sm_80 and newer)
# Each launch of a sequence costs this much GPU time on its own, whatever it does (a split
# launch's three kernels at a tiny shape): an estimate.
LAUNCH_US = 4.0
# Each unit of log-distance between the launch measured and the launch predicted (`apart`) adds
# this share to the predicted time, so between two close predictions the measurement of the more
# alike launch wins.
DISTANCE_WEIGHT = 0.2
# n blocks resident together on an SM take n ** (1 - SHARING) times one alone (`sm_load`).
SHARING = 0.5
# A measurement of another layout, or of the other batching, adds this share to the predicted time
# for each of the two that differs (`foreign`): the config built for the call's layout is not the
# code that was timed, so between two close predictions the one timed as it would run wins. Each
# layout's own best at the H100's big shapes lies within 3% of nn's (4096^3, 8192 x 8192 x 1024),
# the nt batch 512^3 x 64 15% behind nn's: a tenth is between the two.
FOREIGN_WEIGHT = 0.1
# A stream-K tile's owner adds each peer's partial tile in turn: this many k-steps of the tile a
# peer (`fixup`).
FIXUP_K = 8.0
# A split schedule's tail tile is summed by its blocks' atomic adds into C: this many k-steps of
# the tile a block beyond the first (`split_fixup`).
SPLIT_FIXUP_K = 2.0
# Each tile a stream-K block visits costs it this many k-steps of the tile beyond the K it sums:
# the tile's start (its first loads, the pipeline filling) and its end (C stored, partials shared).
TILE_K = 64.0


@dataclass(frozen=True)
class Roof:
    """The best rates any stored kernel of one GPU reached: bytes/ms and FLOP/ms.

    No kernel beats the best bandwidth (ideal bytes: A and B read once, C written once) or the
    best FLOP rate any stored kernel of this GPU reached, so a prediction is never below either.
    """

    bytes_per_ms: float
    flops_per_ms: float

    @classmethod
    def of(cls, measured: Iterable[tuple[Problem, float]]) -> Roof:
        """Return the roof of (problem, time in ms) measurements; infinite where there are none."""
        pairs = [(p, t) for p, t in measured if t > 0]
        return cls(
            max((p.bytes / t for p, t in pairs), default=math.inf),
            max((p.flops / t for p, t in pairs), default=math.inf),
        )


def slots(plan: LaunchPlan, registers: int, smem_bytes: int, limits: Mapping) -> int:
    """Count the blocks of the SGEMM kernel resident on the whole GPU at once.

    Occupancy comes from the block's threads, registers and shared memory against the GPU's limits
    stored with the measurement (threads and blocks an SM holds among them).

    Args:
        plan: The launch plan (its block size is read).
        registers: Registers per thread.
        smem_bytes: Shared memory per block.
        limits: The GPU's limits, as a record stores them.
    """
    threads = plan.block
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = (limits["regs_per_sm"] // per_warp) // warps
    by_smem = limits["smem_per_sm"] // (smem_bytes + SMEM_RESERVED)
    threads_per_sm, blocks_per_sm = resident_per_sm(limits)
    per_sm = min(blocks_per_sm, threads_per_sm // threads, by_regs, by_smem)
    return max(per_sm, 1) * limits["sm_count"]


def sm_load(blocks: int, per_sm: int, sms: int) -> float:
    """Return the busiest SM's time for a launch of `blocks`, in units of one block running alone.

    It gets ceil(blocks / sms) of them, per_sm at a time (wave quantisation), and n blocks together
    take n ** (1 - SHARING) times one alone.
    """
    # SHARING = 1: each resident block runs as fast as one alone, so only whole waves count; 0: they
    # divide the SM's issue rate between them. Without the sharing, a small tile measured with one
    # block an SM (at 512^3) was predicted to run with 8 a SM at 1500^3 as fast, and chosen there at
    # 0.65x cuBLAS.
    on_sm = -(-blocks // sms)
    full, rest = divmod(on_sm, per_sm)
    return full * per_sm ** (1 - SHARING) + (rest ** (1 - SHARING) if rest else 0.0)


@dataclass(frozen=True)
class Launch:
    """A plan's launch at one problem, as the model sees it."""

    load: float  # the busiest SM's load (sm_load) times one block's padded FLOPs, + the serial costs
    launches: int  # launches in the sequence, helpers included
    blocks: int  # blocks of the SGEMM kernels (a split launch's main kernel and tail)
    depth: float  # the depth of K one block sums, on average


@functools.lru_cache(maxsize=4096)
def _geometry(plan: LaunchPlan, M: int, N: int, K: int, slots: int) -> Geometry:
    """Return plan.geometry at (M, N, K), remembered: it changes with neither batch nor beta."""
    # Most of a prediction's time; candidates of one config measured at several shapes share it,
    # and the header's grid asks for each shape at several batches.
    return plan.geometry(M, N, K, slots)


def busiest_sm(plan: LaunchPlan, problem: Problem, per_sm: int, sms: int) -> Launch:
    """Return the plan's launch at `problem`, `per_sm` of its blocks resident on each of `sms` SMs.

    Raises:
        UserError: The plan's family declares no tile (`model: tile` in its YAML).
    """
    # The work of one block is the padded output tile (the rows and columns the family's YAML
    # declares, `model: tile`: BM x BN, TILE x TILE, MR rows or NR columns of the streaming
    # families) times K, split as the grid splits it. For the streaming families a block's work is
    # the slab of the operand it reads, so this scales their memory traffic too (a group of MR
    # rows re-reads B).
    M, N, K = problem.M, problem.N, problem.K
    if plan.tile is None:
        raise UserError("a kernel whose family declares no tile (model: tile, in its YAML) cannot be predicted")
    tm, tn = plan.tile
    geo = _geometry(plan, M, N, K, per_sm * sms)
    # The SGEMM kernels of the sequence (a split launch's main kernel and tail; helpers aside),
    # their blocks sharing the padded work evenly.
    grids = [grid for step, grid in geo.launches if step.kernel in ("", "_tail")]
    sizes = [g[0] * g[1] * (problem.batch if plan.batched else g[2]) for g in grids]
    padded = 2.0 * (-(-M // tm) * tm) * (-(-N // tn) * tn) * K * problem.batch
    per_block = padded / sum(sizes)
    launches = sum(1 for step, _ in geo.launches if not step.beta_only or problem.beta != 0)
    # A stream-K block visits tiles / blocks tiles or more, however short K is (4999 x 3489 x 14 on
    # the H200: 6-8 a block, 2.7-4x the prediction without TILE_K; notes/performance.md).
    streamed = stream_k(plan)
    tiles = -(-M // tm) * -(-N // tn) * problem.batch
    visits = TILE_K * 2.0 * tm * tn * max(tiles / sum(sizes), 1.0) if streamed else 0.0
    load = sum(sm_load(b, per_sm, sms) for b in sizes) * (per_block + visits)
    if streamed:
        load += fixup(M, N, tm, tn, sizes[0])
    load += split_fixup(geo.values.get("TAIL", 0), K, k_step(plan), per_sm * sms, tm, tn)
    return Launch(load, launches, sum(sizes), per_block / (2.0 * tm * tn))


@functools.lru_cache(maxsize=4096)
def stream_k(plan: LaunchPlan) -> bool:
    """Return whether the plan is warptile's stream-K schedule, unbatched (`fixup` prices it)."""
    # Cached: busiest_sm asks at every candidate and shape, and plan.env is a tuple.
    return not plan.batched and dict(plan.env).get("SCHEDULE") == "stream_k"


def fixup(M: int, N: int, tm: int, tn: int, g: int) -> float:
    """Return the load a stream-K tile's owner adds by summing its peers' partial tiles in turn.

    Args:
        g: The persistent grid's blocks. The S tiles that would not fill a last wave, plus one
            wave, are shared among them (g / S blocks a tile, as templates/_warptile_stream_k.cuh.j2
            shares them); the owner adds the others' partials one after another.
    """
    # Without it the H200's untuned picks at deep K and small M x N were stream-K tiles shared by
    # 66-132 blocks, predicted 2-3x low (128x128x32768: 36 us, ran 141). FIXUP_K is that sum's
    # cost a peer in k-steps of the tile: 6.7-8.1 from those misses alone; the fit set cannot
    # choose it (flat at 1.02-1.04x for 2-16), notes/performance.md has the figures.
    tiles = -(-M // tm) * -(-N // tn)
    if g <= 0 or tiles % g == 0:
        return 0.0
    shared = tiles % g + g if tiles > g else tiles
    return in_turn(FIXUP_K, g, shared, tm, tn)


@functools.lru_cache(maxsize=4096)
def k_step(plan: LaunchPlan) -> int:
    """Return the plan's BK (a split tail's k-step), 1 where it has none."""
    return int(dict(plan.env).get("BK", 1))


def split_fixup(tail: int, K: int, bk: int, slots: int, tm: int, tn: int) -> float:
    """Return the load a split schedule's tail adds: each tail tile's blocks add into C in turn.

    Args:
        tail: The tiles past the last whole wave that the tail's blocks share (the launch value
            TAIL of warptile's split schedules; 0 for every other plan).
        slots: Resident blocks: min(slots, tail * cdiv(K, bk)) share the tail.
    """
    # Without it 32-row split tiles measured at deep K (12 blocks a tile) were chosen where 20-30
    # share a tile, predicted 2-4x low (notes/performance.md has SPLIT_FIXUP_K's judgment).
    if tail <= 0:
        return 0.0
    return in_turn(SPLIT_FIXUP_K, min(slots, tail * -(-K // bk)), tail, tm, tn)


def in_turn(k_steps: float, blocks: int, tiles: int, tm: int, tn: int) -> float:
    """Return the load of `blocks` sharing `tiles` tiles, k_steps a block past one, in turn."""
    return k_steps * max(blocks / tiles - 1.0, 0.0) * 2.0 * tm * tn


def foreign(measured: Problem, problem: Problem) -> float:
    """Return the factor on a prediction at `problem` from a measurement at `measured`.

    1 + FOREIGN_WEIGHT for each of the layout and the batching (batched or not) that differs: so
    it is one factor for every call of one (layout, batched) pool, as the dispatching header bakes it.
    """
    differ = (measured.layout != problem.layout) + ((measured.batch > 1) != (problem.batch > 1))
    return 1.0 + FOREIGN_WEIGHT * differ


def apart(a: Launch, b: Launch) -> float:
    """Return the log-distance of two launches: in blocks and in the depth of K a block sums."""
    # The distance is the launch's, not the shape's: the 32 x 128 split tile measured at
    # 200 x 3000 x 1000 launches 660 blocks 255 deep there and 660 blocks 206 deep at 777^3
    # (0.21 apart), so that measurement carries there almost as it is, though the shapes are 2.96
    # apart in log(M, N, K).
    return abs(math.log(a.blocks / b.blocks)) + abs(math.log(a.depth / b.depth))


@dataclass(frozen=True)
class Candidate:
    """One stored measurement and the config built for the new problem's layout and batch.

    The measurement is a config timed at its tuned shape; the config that would run is the same
    unless the layout or batch differ.
    """

    problem: Problem  # where it was measured
    measured: LaunchPlan  # the plan of the config measured
    plan: LaunchPlan  # the plan of the config that would run
    time_ms: float
    slots: int  # blocks of the measured config resident on the whole GPU (`slots`)
    sms: int
    what: object  # handed back to the caller

    def predict_ms(self, problem: Problem, roof: Roof, at_p: Launch | None = None) -> float:
        """Predict the time (ms) of the config that would run at `problem`, under `roof`.

        Args:
            at_p: `launch_at(problem)`, where the caller has it (candidates of one plan share it).
        """
        # The measured time, less its launches, scales by the busiest SM's load; the roof bounds it
        # below; each launch adds LAUNCH_US; distance from the measured launch adds DISTANCE_WEIGHT,
        # a measurement of another layout or batching FOREIGN_WEIGHT (the header's C repeats this
        # arithmetic in this order, so that its choice is this one to the last bit).
        at_s = self.measured_launch
        if at_p is None:
            at_p = self.launch_at(problem)
        launch_ms = LAUNCH_US * 1e-3
        scaled = self.body_s * at_p.load / at_s.load
        body = max(scaled, problem.bytes / roof.bytes_per_ms, problem.flops / roof.flops_per_ms)
        near = (body + at_p.launches * launch_ms) * (1 + DISTANCE_WEIGHT * apart(at_s, at_p))
        return near * foreign(self.problem, problem)

    @functools.cached_property
    def body_s(self) -> float:
        """Return the measured time (ms) less its launches, at least a tenth of it."""
        return max(self.time_ms - self.measured_launch.launches * (LAUNCH_US * 1e-3), 0.1 * self.time_ms)

    @functools.cached_property
    def per_sm(self) -> int:
        """Return the blocks of the measured config resident on each SM (at least one)."""
        return max(self.slots // self.sms, 1)

    @functools.cached_property
    def launch_key(self) -> tuple:
        """What `launch_at` reads besides the problem: candidates equal in it share launches."""
        return (self.plan, self.per_sm, self.sms)

    def launch_at(self, problem: Problem) -> Launch:
        """Return the launch of the config that would run at `problem` (predict_ms's `at_p`)."""
        return busiest_sm(self.plan, problem, self.per_sm, self.sms)

    @functools.cached_property
    def measured_launch(self) -> Launch:
        """The measured launch (`busiest_sm` at the measured problem), worked out once."""
        # A new shape's choice predicts every candidate of the pool, and the header's build every
        # candidate at each shape of its grid: the measured side never changes.
        return busiest_sm(self.measured, self.problem, self.per_sm, self.sms)


def distance(a: Problem, b: Problem) -> float:
    """Return the log-distance over M, N, K and the batch between two problems.

    It says how near a tuned shape is (the nearest shape's winner, which dispatch is compared
    with), not how far a prediction carries (`apart`).
    """
    pairs = ((a.M, b.M), (a.N, b.N), (a.K, b.K), (a.batch, b.batch))
    return sum(abs(math.log(x / y)) for x, y in pairs)


def fastest(candidates: list[Candidate], problem: Problem, roof: Roof) -> tuple[Candidate, float] | None:
    """Return the candidate with the least predicted time at `problem`, and that time (ms)."""
    best = None
    for c in candidates:
        t = c.predict_ms(problem, roof)
        if best is None or t < best[1]:
            best = (c, t)
    return best
