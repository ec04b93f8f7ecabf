"""`autotune search --dry-run`: filter and compile every point (or a sample); no GPU.

It prints the counts and the top rejection reasons.
"""

from __future__ import annotations

import random
import re
import time

from ..core.types import PINNED_PARAMS, Config, Problem, UserError
from ..kernels.counts import cached_valid, count_key, store_valid
from ..kernels.enumeration import Enumeration
from ..kernels.family import Family
from ..kernels.limits import DeviceLimits, profile_for_arch
from ..kernels.space import Space
from .inputs import ask_dry_run, live_limits, need_nvrtc, readable, runs_on


def dry_run_all(args, spaces: list[Space], problems: list[Problem]) -> int:
    """Run `search --dry-run` over every shape and space; return the exit status."""
    from ..search.evaluate import default_jobs

    need_nvrtc()

    limits = live_limits(args.device) if args.arch is None else None
    limits = limits or profile_for_arch(args.arch)
    arch = args.arch or limits.arch
    jobs = args.jobs or default_jobs()
    for p in problems:  # a named family that cannot run a shape is an error before the cost question
        readable(spaces, p, bool(args.family))
    enums: dict[str, Enumeration] = {}
    counts = {sp.family.name: cached_valid(sp, limits) for sp in spaces}
    for sp in spaces:  # asked before any compile; counted now where the cache does not know
        if counts[sp.family.name] is None:
            key = count_key(sp, limits)
            enums[key] = enumerate_space(sp, limits)
            counts[sp.family.name] = len(enums[key].valid)
    if not args.yes:
        ask_dry_run(counts, args.sample, jobs)
    return max(dry_run_shape(args, spaces, p, limits, arch, jobs, enums) for p in problems)


def enumerate_space(sp: Space, limits: DeviceLimits) -> Enumeration:
    """Enumerate a space's valid points under `limits`, and remember the count (counts.py)."""
    en = sp.enumerate(limits)
    store_valid(sp, limits, len(en.valid))
    return en


def dry_run_shape(
    args,
    spaces: list[Space],
    problem: Problem,
    limits: DeviceLimits,
    arch: str,
    jobs: int,
    enums: dict[str, Enumeration],
) -> int:
    """Dry-run every space at one shape, a row per family; a family left empty is an error."""
    print(f"dry run: {problem.name}, limits of {limits.name}, compiling for {arch}")
    head = (
        f"{'family':<11} {'points':>8} {'static ok':>9} {'compiled':>8} {'res. ok':>7}  "
        "top rejection reasons (points removed)"
    )
    print(head + "\n" + "-" * len(head))
    empty, failed = [], []
    for sp in runs_on(readable(spaces, problem, bool(args.family)), limits, bool(args.family)):
        t0 = time.monotonic()
        sp = sp.for_problem(problem)  # built for the problem's layout, batching and alignment
        key = count_key(sp, limits)  # problems that build the same space share one enumeration
        if key not in enums:
            enums[key] = enumerate_space(sp, limits)
        en = enums[key]
        row, top, ok, kinds = dry_run_family(args, sp, en, problem, limits, arch, jobs)
        print(row + f"  [{time.monotonic() - t0:.1f}s]")
        failed += [(sp.family, kind) for kind in kinds]
        if not ok:
            example = f"; e.g. {kinds[0][1]}" if kinds else ""
            empty.append(
                sp.describe_empty(en)
                if not en.valid
                else f"family {sp.family.name}: every statically valid point failed to compile or was rejected "
                f"for its resources; top reasons: " + "; ".join(f"{k} ({v})" for k, v in top) + example
            )
    print_failures(failed, arch, args.verbose)
    if empty:
        raise UserError(" | ".join(empty))
    return 0


def dry_run_family(
    args, sp: Space, en: Enumeration, problem: Problem, limits: DeviceLimits, arch: str, jobs: int
) -> tuple[str, list, int, list]:
    """Dry-run one family: its row, top reasons, how many points passed, and its compile failures.

    The failures are kinds as (count, message, config), the most frequent first.
    """
    from ..search.evaluate import prepare

    points = en.valid
    if args.sample and len(points) > args.sample:
        points = random.Random(args.seed).sample(points, args.sample)
    preps = prepare(points, problem, limits, arch, {sp.family.name: sp.family}, jobs)
    compiled = sum(1 for p in preps if p.measurement is None or p.measurement.status.value == "rejected")
    ok = sum(1 for p in preps if p.measurement is None)
    reasons = dict(en.rejected)
    kinds: dict[str, list] = {}
    for p in preps:
        m = p.measurement
        if m is None:
            continue
        key = m.message.split(" (")[0] if m.status.value == "rejected" else m.status.value
        key = (
            "spills"
            if key.startswith("spills")
            else ("registers x threads > limit" if key.startswith("registers") else key)
        )
        reasons[key] = reasons.get(key, 0) + 1
        if m.status.value != "rejected":
            kinds.setdefault(f"{m.status.value}: {m.message}", [0, p.config])[0] += 1
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
    row = (
        f"{sp.family.name:<11} {en.total:>8} {len(en.valid):>9} {f'{compiled}/{len(points)}':>8} {ok:>7}  "
        + "; ".join(f"{k} ({v})" for k, v in top)
    )
    ranked = sorted(((n, msg, cfg) for msg, (n, cfg) in kinds.items()), key=lambda t: -t[0])
    return row, top, ok, ranked


def print_failures(failed: list, arch: str, verbose: bool, shown: int = 3) -> None:
    """Print each family's most frequent failures with their reason (NVRTC's first lines).

    With `verbose`, NVRTC's whole log for each.
    """
    per_family: dict[str, int] = {}
    for fam, (n, message, cfg) in failed:
        per_family[fam.name] = per_family.get(fam.name, 0) + 1
        if per_family[fam.name] > shown:
            continue
        print(f"{fam.name}: {n} x {message}")
        if verbose:
            print(indent(compile_log(fam, cfg, arch)))


def compile_log(fam: Family, cfg: Config, arch: str) -> str:
    """Return NVRTC's whole log for one config (compiled again: failures are not cached)."""
    from ..gpu.compile import CompileError, compile_source
    from ..kernels.render import DEFAULT_KERNEL, render

    try:
        compile_source(render(fam.resolve(cfg)), fam.compile_arch(arch), DEFAULT_KERNEL, use_cache=False)
    except CompileError as exc:
        return exc.log or str(exc)
    return f"{cfg.name} compiles without error here (its failure was recorded elsewhere or earlier)"


def indent(text: str) -> str:
    """Return `text` indented by four spaces."""
    return "\n".join("    " + ln for ln in text.rstrip().splitlines())


def config_from_name(fam: Family, name: str) -> Config | None:
    """Return the config that a procedural name (Config.name) stands for in family `fam`."""

    def value(p: str) -> str:
        choices = fam.params[p].choices
        return "(" + "|".join(map(re.escape, choices)) + ")" if choices else "(-?\\d+)"

    names = sorted(fam.params)
    # Layout and batch parameters at 0 are left out of names (Config.name): optional here.
    parts = [f"(?:_{re.escape(p)}{value(p)})?" if p in PINNED_PARAMS else f"_{re.escape(p)}{value(p)}" for p in names]
    m = re.fullmatch(re.escape(fam.name) + "".join(parts), name)
    if m is None:
        return None
    values = {p: "0" if v is None else v for p, v in zip(names, m.groups(), strict=True)}
    return Config.make(fam.name, {p: v if fam.params[p].choices else int(v) for p, v in values.items()})
