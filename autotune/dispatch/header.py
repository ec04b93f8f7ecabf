"""A C/C++ header that chooses a kernel per call as `autotune.matmul` does, from a results folder.

It holds the kernels the choice can fall on (each config once, built for the layouts and batching
it serves) and the choice itself as data: the tuned shapes' own configs (exact match) and, for
every other shape, dispatch/model.py's candidates -- their measurements, occupancy and launch
plans -- evaluated in C at run time by the same arithmetic. It holds the configs the model picks
on a grid of shapes -- all, or (by default) those within a budget that come nearest to all --
so the header grows with the configs, not with the shapes.

It lives in dispatch/ because the choice is dispatch's (table.py, model.py); records/export.py,
below, renders each held config's kernel and launchers as the one-config header does.
"""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.types import LAYOUTS, Config, Problem, UserError
from ..core.version import __version__
from ..kernels.family import TEMPLATE_DIR, cached_family
from ..kernels.limits import DeviceLimits, profile_for_arch
from ..kernels.render import render, render_template, template
from ..records.export import _DEFINE, _EXTERN_KERNEL, _arch_flags, c_text, check_prefix, launcher_context
from ..records.results import entry_config
from ..records.store import atomic_write_text
from . import model
from .api import fallback_config
from .table import _reads, built_for, table_for

# The shapes the model is run at to find the configs it can choose (M, N and K each): log-spaced
# from one row to past the sizes a GPU's memory holds in one matrix.
GRID = (1, 3, 8, 24, 64, 160, 400, 1000, 2500, 6000, 16000)
# The batches of the grid's batched shapes: the kernel a batched call is given changes with the
# batch as with M, N and K (64 small matrices want another tile than 8 of them).
GRID_BATCHES = (2, 8, 64, 512)
TIER = "highest"  # the header serves strict FP32 (matmul's default precision)
# How many kernels a header holds by default: nvcc takes about 2 s a kernel, so about four
# minutes to build. On the H100 folder's records the model predicts the held best at shapes
# nobody tuned 7% slower than the best of all with 96 kernels, 2.5% with 160 (all: 461).
KERNELS = 128


@dataclass
class _Cand:
    """A model.Candidate as the header keeps it: what predict_ms reads, the run's part folded in."""

    kernel: int  # index of the held config that would run
    suits: int  # index of its family's `suits` test
    per_sm: int
    sms: int
    at_s: model.Launch  # the measured launch
    body_s: float  # the measured time less its launches (ms)
    foreign: float  # the factor on its predictions for this pool (model.foreign)


@dataclass
class Dispatch:
    """Everything a dispatching header says: held configs, candidates per pool, exact picks."""

    configs: list[Config] = field(default_factory=list)  # held, in kernel order
    pools: dict[tuple[str, bool], list[_Cand]] = field(default_factory=dict)  # (layout, batched) -> candidates
    fallback: dict[tuple[str, bool], int] = field(default_factory=dict)  # pool -> kernel when none suits
    exact: list[tuple[int, int, int, str, int, bool, int]] = field(
        default_factory=list
    )  # M N K layout batch beta!=0 -> kernel
    suits: list[str] = field(default_factory=list)  # a family's `suits` as C over M, N, K
    roof: model.Roof = model.Roof(0.0, 0.0)

    sources: dict[str, int] = field(default_factory=dict)  # a held kernel's source -> its index
    held: dict[tuple[str, bool], list[str]] = field(default_factory=dict)  # pool -> its candidates' names

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def source(cfg: Config) -> str:
        """Return the kernel source of `cfg` (what makes two held configs one kernel)."""
        # Two configs of one source (a parameter the template does not read) are one kernel.
        return render(cached_family(cfg.family).resolve(cfg), kernel_name="at_k")

    def kernel(self, cfg: Config) -> int:
        """Return the index of the held kernel whose source is `cfg`'s, adding it if none is."""
        source = self.source(cfg)
        if source not in self.sources:
            self.sources[source] = len(self.configs)
            self.configs.append(cfg)
        return self.sources[source]


def pool_candidates(table, layout: str, batched: bool, limits: DeviceLimits) -> list[tuple[str, model.Candidate]]:
    """Return (family, candidate) of every stored entry the model weighs for calls of this pool.

    As table._Table.choose gathers them, in its order, before `suits` (which depends on the shape).
    """
    probe = Problem(64, 64, 64, layout, 2 if batched else 1, precision=TIER)
    out = []
    for shape, fams in table._pool(probe):
        for f, entry in fams.items():
            if not _reads(f, probe):
                continue
            try:
                cfg = built_for(entry_config(entry), layout, probe.batch, TIER, limits)
                if cfg is None:
                    continue
                measured = table._plan(entry_config(entry))
                slots = model.slots(measured, entry["registers"], entry["smem_bytes"], entry["limits"])
                sms = entry["limits"]["sm_count"]
                cand = model.Candidate(shape, measured, table._plan(cfg), entry["time_ms"], slots, sms, cfg)
            except (UserError, KeyError, TypeError, ValueError):
                continue  # as table.py: an entry from an older format, or a family no longer shipped
            out.append((f, cand))
    return out


def chosen(cands: list[tuple[str, model.Candidate]], problem: Problem, roof: model.Roof) -> Config | None:
    """Return the config the model chooses among `cands` at `problem` (suits checked)."""
    fit = [c for f, c in cands if not cached_family(f).unsuited(problem)]
    best = model.fastest(fit, problem, roof)
    return None if best is None else best[0].what


def _predictions(cands, layout: str, batched: bool, roof: model.Roof) -> np.ndarray:
    """Return each candidate's predicted ms (column) at each GRID shape (row); inf if unsuited."""
    shapes = [
        Problem(m, n, k, layout, batch, precision=TIER)
        for m, n, k, batch in itertools.product(GRID, GRID, GRID, GRID_BATCHES if batched else (1,))
    ]
    t = np.full((len(shapes), len(cands)), np.inf)
    families = {f for f, _ in cands}
    # Measurements of one config share its launch at a shape: worked out once per shape and plan,
    # not per candidate (most of the export's time was the same busiest_sm again).
    keys: dict = {}
    shared = [keys.setdefault(c.launch_key, len(keys)) for _, c in cands]
    for i, p in enumerate(shapes):
        fits = {f: not cached_family(f).unsuited(p) for f in families}
        launches: dict[int, model.Launch] = {}
        for j, (f, c) in enumerate(cands):
            if fits[f]:
                at_p = launches.get(shared[j])
                if at_p is None:
                    at_p = launches[shared[j]] = c.launch_at(p)
                t[i, j] = c.predict_ms(p, roof, at_p)
    return t[np.isfinite(t).any(axis=1)]


def _cover(pools: dict, source_of, held: set, kernels: int | None) -> dict:
    """Return, per pool, the indexes of the candidates the header holds.

    With `kernels` None, every candidate the model chooses somewhere on GRID (the header then
    chooses as matmul does at every grid shape). Else greedily the candidate, of any pool, whose
    kernel cuts that pool's loss the most per kernel added -- the loss being the mean over the grid
    of log(predicted ms of the best held / of the best of all), a shape no held one suits counted
    as 16x slower -- until `kernels` kernels are held or every pool has its best everywhere.
    Kernels already held (`held`: the tuned shapes' own, as sources) come free.
    """
    if kernels is None:
        return {key: sorted(set(np.argmin(t, axis=1).tolist())) for key, (_, t) in pools.items()}
    cap = np.log(16.0)
    best = {key: t.min(axis=1) for key, (_, t) in pools.items()}
    cur = {key: np.full(len(b), np.inf) for key, b in best.items()}
    kept: dict = {key: [] for key in pools}
    held = set(held)

    def loss(key, times) -> float:
        return float(np.minimum(np.log(times / best[key]), cap).mean()) if len(times) else 0.0

    while True:
        pick, pick_gain = None, 0.0
        for key, (cands, t) in pools.items():
            base = loss(key, cur[key])
            for j in range(len(cands)):
                if j in kept[key]:
                    continue
                gain = base - loss(key, np.minimum(cur[key], t[:, j]))
                if gain <= 1e-9:
                    continue
                free = source_of(cands[j][1].what) in held
                if not free and len(held) >= kernels:
                    continue
                gain = math.inf if free else gain
                if gain > pick_gain:
                    pick, pick_gain = (key, j), gain
        if pick is None:
            return {key: sorted(js) for key, js in kept.items()}
        key, j = pick
        kept[key].append(j)
        cur[key] = np.minimum(cur[key], pools[key][1][:, j])
        held.add(source_of(pools[key][0][j][1].what))


def build(table, arch: str, limits: DeviceLimits | None = None, kernels: int | None = KERNELS) -> Dispatch:
    """Return what a dispatching header holds for `table` (a results table) on a GPU of `arch`.

    Args:
        kernels: At most this many kernels (the tuned shapes' own and each pool's fallback are
            held whatever it says); None: every config the model chooses somewhere on the grid.
    """
    limits = limits or profile_for_arch(arch)
    d = Dispatch(roof=table.roof)
    seen: set[Problem] = set()
    for shape, _ in table.records:  # the tuned shapes' own picks, for calls with beta 0 and not
        base = shape.with_precision(TIER).with_beta(0.0)
        if base in seen:
            continue
        seen.add(base)
        for nz in (False, True):
            found = table.choose(base.with_beta(1.0 if nz else 0.0), None, limits)
            if found is not None and found[3] is None:
                layout = 2 * base.trans[0] + base.trans[1]
                d.exact.append((base.M, base.N, base.K, layout, base.batch, int(nz), d.kernel(found[2])))
    pools = {}
    for layout, batched in itertools.product(LAYOUTS, (False, True)):
        cands = pool_candidates(table, layout, batched, limits)
        pools[(layout, batched)] = (cands, _predictions(cands, layout, batched, d.roof))
    keep = _cover(pools, d.source, set(d.sources), kernels)
    suits: dict[str, int] = {}
    for (layout, batched), (cands, _) in pools.items():
        pool = d.pools[(layout, batched)] = []
        kept = [cands[j] for j in keep[(layout, batched)]]
        d.held[(layout, batched)] = [c.what.name for _, c in kept]
        for f, c in kept:
            if f not in suits:
                suits[f] = len(d.suits)
                d.suits.append(
                    " && ".join(f"({ex.to_c({})})" for ex, _ in cached_family(f).declaration.suits) or "true"
                )
            foreign = model.foreign(c.problem, Problem(1, 1, 1, layout, 2 if batched else 1))
            pool.append(_Cand(d.kernel(c.what), suits[f], c.per_sm, c.sms, c.measured_launch, c.body_s, foreign))
        if all(cached_family(f).declaration.suits for f, _ in kept):
            fb = built_for(fallback_config(arch), layout, 2 if batched else 1, TIER)
            d.fallback[(layout, batched)] = d.kernel(fb)  # where no candidate suits the shape, as matmul
    return d


def _number(x: float) -> str:
    """Return a double as a C literal that reads back as the same double."""
    return "HUGE_VAL" if x == float("inf") else repr(float(x))


def _kernel_part(cfg: Config, i: int, prefix: str) -> dict:
    """Return one held config's plan, section, undefs and what the model reads of it."""
    resolved = cached_family(cfg.family).resolve(cfg)
    kernel = f"{prefix}_sgemm_kernel_{i}"
    context = launcher_context(resolved, kernel)
    source = _EXTERN_KERNEL.sub("static ", render(resolved, kernel_name=kernel).strip())
    folder = resolved.family.path.parent
    common = dict(P=prefix, PU=prefix.upper(), TRANS=resolved.plan.layout, **context)
    plan = render_template(template(folder, "_export_plan.h.j2"), **common).strip()
    section = render_template(template(folder, "_export_section.h.j2"), KERNEL_SOURCE=source, WITH_PLAN=False, **common)
    steps = [
        {"i": j, "sgemm": s.kernel in ("", "_tail"), "beta_only": s.beta_only}
        for j, s in enumerate(resolved.plan.steps)
    ]
    if resolved.plan.tile is None:
        raise UserError(f"{cfg.name}: its family declares no tile (model: tile), which the dispatcher reads")
    return dict(
        name=c_text(cfg.name, 1024),
        plan=plan,
        section=section.strip(),
        undefs=sorted({n for n in _DEFINE.findall(source) if kernel not in n}),
        steps=steps,
        batched=resolved.plan.batched,
        tile=resolved.plan.tile,
        stream_k=model.stream_k(resolved.plan),
        k_step=model.k_step(resolved.plan),
    )


def build_target(d: Dispatch, arch: str) -> str:
    """Return the one target every held kernel builds for on a device of `arch` (sm_90 or sm_90a).

    A family that needs an architecture-specific target (wgmma: sm_90a) makes the whole build use
    it, since one nvcc target builds every kernel of the header (or library).
    """
    targets = {cached_family(cfg.family).compile_arch(arch) for cfg in d.configs} or {arch}
    special = sorted(t for t in targets if t.endswith("a"))
    return special[0] if special else arch


def header_context(d: Dispatch, gpu: str, arch: str, prefix: str = "autotune") -> dict:
    """Return what the dispatching templates read of `d`: its kernels, the choice's data, names.

    A header and a library (dispatch/library.py) render the same context, so their C is one.
    """
    check_prefix(prefix)
    cands, pools = [], []
    for layout, batched in itertools.product(LAYOUTS, (False, True)):
        first = len(cands)
        for c in d.pools.get((layout, batched), []):
            a = c.at_s
            row = (c.kernel, c.suits, c.per_sm, c.sms, a.launches, a.blocks, a.load, a.depth, c.body_s, c.foreign)
            cands.append([str(v) if isinstance(v, int) else _number(v) for v in row])
        pools.append((first, len(cands), d.fallback.get((layout, batched), -1)))
    kernels = [_kernel_part(cfg, i, prefix) for i, cfg in enumerate(d.configs)]
    return dict(
        P=prefix,
        PU=prefix.upper(),
        VERSION=c_text(__version__),
        DATE=c_text(_dt.date.today().isoformat()),
        TIER="strict FP32",
        GPU=c_text(gpu),
        ARCH_FLAGS=c_text(_arch_flags(build_target(d, arch))),
        SHAPES=len({e[:5] for e in d.exact}) if d.exact else 0,
        KERNELS=kernels,
        EXACT=[list(e) for e in d.exact],
        CANDS=cands,
        POOLS=pools,
        SUITS=d.suits,
        LAYOUTS=LAYOUTS,
        SHARE_EXP=_number(1 - model.SHARING),
        LAUNCH_MS=_number(model.LAUNCH_US * 1e-3),
        DISTANCE=_number(model.DISTANCE_WEIGHT),
        FIXUP_K=_number(model.FIXUP_K),
        TILE_K=_number(model.TILE_K),
        SPLIT_FIXUP_K=_number(model.SPLIT_FIXUP_K),
        ROOF_BYTES=_number(d.roof.bytes_per_ms),
        ROOF_FLOPS=_number(d.roof.flops_per_ms),
    )


def template_folder(d: Dispatch) -> Path:
    """Return the folder whose export templates render `d` (its first kernel's family's)."""
    return cached_family(d.configs[0].family).path.parent if d.configs else TEMPLATE_DIR


def header_text(d: Dispatch, gpu: str, arch: str, file_name: str = "tuned_sgemm.h", prefix: str = "autotune") -> str:
    """Return the dispatching header's text for `d`."""
    context = header_context(d, gpu, arch, prefix)
    return render_template(
        template(template_folder(d), "_export_dispatch.h.j2"), FILE_NAME=c_text(file_name), **context
    )


def narrowed(table, shapes: list[Problem], slug: str):
    """Return `table` with only the records of `shapes` (each in its layout and batch).

    Raises:
        UserError: A shape has no record.
    """
    keys = {(p.M, p.N, p.K, p.layout, p.batch) for p in shapes}
    records = [(s, f) for s, f in table.records if (s.M, s.N, s.K, s.layout, s.batch) in keys]
    missing = keys - {(s.M, s.N, s.K, s.layout, s.batch) for s, _ in records}
    if missing:
        m = Problem(*sorted(missing)[0])
        raise UserError(f"no record of {m.name} for {slug} (autotune list --gpu {slug} shows those there are)")
    return type(table)(table.folder, table.state, records, table.clean)


def select(
    results: Path | str | None, slug: str, shapes: list[Problem] | None = None, kernels: int | None = KERNELS
) -> tuple[Dispatch, str, str]:
    """Return what a dispatching header of one GPU's records holds, the GPU's name and its arch.

    Args, Raises: as export_dispatch.
    """
    table = table_for(results, slug)
    if shapes is not None:
        table = narrowed(table, shapes, slug)
    if not any(s.precision == TIER for s, _ in table.records):
        raise UserError(f"no strict-FP32 records for {slug}: nothing to dispatch to (run autotune search first)")
    gpu = next(iter(next(iter(table.records))[1].values()))["limits"]  # as the records measured it
    arch = gpu.get("arch", "sm_90")
    return build(table, arch, kernels=kernels), gpu.get("name", slug), arch


def export_dispatch(
    results: Path | str | None,
    slug: str,
    out: Path | str,
    prefix: str = "autotune",
    shapes: list[Problem] | None = None,
    kernels: int | None = KERNELS,
) -> tuple[Path, Dispatch]:
    """Write the dispatching header of one GPU's records to `out` (whole or not at all).

    Args:
        results: The results folder; None: ./results with the shipped results beside it, as
            `autotune.matmul` reads them.
        shapes: Only the records of these shapes (each in its layout and batch), if given.
        kernels: At most this many kernels, more only where the tuned shapes' own and the
            fallbacks need them (None: every config the model chooses on its grid; the header
            then chooses as `autotune.matmul` does at every shape of the grid).

    Raises:
        UserError: No records (of those shapes), a damaged record, or a bad prefix.
    """
    check_prefix(prefix)
    d, gpu, arch = select(results, slug, shapes, kernels)
    out = Path(out)
    atomic_write_text(out, header_text(d, gpu, arch, out.name, prefix))
    return out, d
