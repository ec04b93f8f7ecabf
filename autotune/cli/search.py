"""`autotune search`: tune each shape, record the best, print the summary."""

from __future__ import annotations

import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core import redact
from ..core.types import Problem, UserError
from ..kernels.space import Space
from .dry_run import compile_log, config_from_name, dry_run_all, indent
from .inputs import (
    ask_search,
    check_results_writable,
    load_spaces,
    meant_for,
    need_nvrtc,
    parse_problems,
    runs_on,
    trials_of,
)


def cmd_search(args) -> int:
    # --timeout alone: the clock is the budget (its record says trials null).
    """Run `autotune search` (or its dry run) for every shape asked; return the exit status."""
    args.timed_only = args.trials is None and args.timeout is not None
    args.trials = trials_of(args)
    problems = parse_problems(args)
    spaces = load_spaces(args)
    prior_folders(args)  # an unknown GPU is an error before the GPU is touched
    if args.dry_run:
        return dry_run_all(args, spaces, problems)
    from ..search.evaluate import build_evaluator, default_jobs, default_window

    args.window = args.window or default_window(args.jobs or default_jobs(), args.trials)
    if not args.yes:
        ask_search(args, spaces, problems, args.jobs or default_jobs())
    if args.replay:
        spec = {"kind": "replay", "path": args.replay, "arch": args.arch}
    else:
        need_nvrtc()
        spec = {
            "kind": "gpu",
            "device": args.device,
            "arch": args.arch,
            "timeout_s": args.candidate_timeout,
            "seed": args.seed,
            "jobs": args.jobs or default_jobs(),
        }
    try:
        ev = build_evaluator(spec)
    except RuntimeError as exc:
        raise UserError(f"no usable GPU ({exc}); 'autotune search --dry-run' works without one") from None
    try:
        check_results_writable(args.results, ev.limits.slug, problems, args.storage)
        return max(search_one(args, spaces, problem, ev, spec) for problem in problems)
    finally:
        ev.close()


def suited(spaces: list[Space], problem: Problem, named: bool, limits) -> list[Space]:
    """Return the families meant for this shape (their declared `suits`) that this GPU runs.

    All those that read it when the user named them; none of the named that it runs is an error.
    """
    keep = runs_on(meant_for(spaces, problem, named), limits, named)
    for sp in spaces:
        if sp not in keep:
            why = sp.family.gaps(problem) + sp.family.unsuited(problem) + sp.family.device_gaps(limits)
            print(f"{sp.family.name}: not for {problem.name} ({'; '.join(why)})", flush=True)
    return keep


def with_priors(spaces: list[Space], problem: Problem, args) -> list[Space]:
    """Return the spaces with --priors: configs stored for those GPUs at the nearest shapes."""
    from ..records.results import stored_priors

    folders = prior_folders(args)
    if not folders:
        return spaces
    out = []
    for sp in spaces:
        priors = [c for root, slug in folders for c in stored_priors(root, slug, sp.family.name, problem)]
        if not getattr(args, "quiet", False):
            print(f"{sp.family.name}: {len(priors)} priors from {', '.join(s for _, s in folders)}", flush=True)
        out.append(sp.with_priors(priors))
    return out


def prior_folders(args) -> list[tuple[Path, str]]:
    """Return --priors as (results root, GPU folder): a GPU's folder under --results, or a path."""
    from ..records.results import resolve_gpu

    out = []
    for g in getattr(args, "priors", []):
        path = Path(g)
        if path.is_dir() and any(path.glob("*.json")):
            out.append((path.parent, path.name))
        else:
            out.append((Path(args.results), resolve_gpu(args.results, g)))
    return out


def search_one(args, spaces: list[Space], problem: Problem, ev, spec: dict) -> int:
    """Search one shape and record its best; return the exit status."""
    from ..search.driver import SearchStopped, search
    from ..search.progress import Progress
    from ..search.storage import STORAGE_FAULTS, default_storage, fault_line, make_storage

    spaces = with_priors(suited(spaces, problem, named=bool(args.family), limits=ev.limits), problem, args)
    slug = ev.limits.slug
    storage = args.storage or default_storage(args.results, slug)
    make_storage(storage)  # a URL that cannot be opened is said now, before cuBLAS or a search process runs
    plan_kw = dict(gpu_slug=slug, storage=storage, trials=args.trials, sampler=args.sampler, seed=args.seed)
    t0 = time.monotonic()
    procs, planned, base = _start(args, spaces, problem, ev, spec, plan_kw)
    print(
        f"{ev.limits.name}: {problem.name}, cuBLAS {base['gflops']:.0f} GFLOP/s "
        f"(strict FP32, same process), {len(spaces)} families, "
        + (f"until {args.timeout:g} s" if args.timed_only else f"{args.trials} trials each")
        + (f", {args.workers} workers" if args.workers > 1 else ""),
        flush=True,
    )
    progress = Progress(enabled=not args.quiet, cublas_gflops=base["gflops"])
    try:
        if procs is not None:
            results = procs.run(ev, progress=progress)
        else:
            results = search(
                spaces,
                problem,
                ev,
                timeout_s=args.timeout,
                planned=planned,
                progress=progress,
                batch=args.window,
                **plan_kw,
            )
    except SearchStopped as stop:
        raise SearchStopped(stopped_line(args, problem, storage, ev, str(stop), stop.results), []) from None
    except STORAGE_FAULTS as exc:  # the parent of search processes, reading the study
        raise SearchStopped(stopped_line(args, problem, storage, ev, fault_line(storage, exc), []), []) from None
    elapsed = time.monotonic() - t0
    path, changed, entries = record(args, problem, storage, ev, results)
    print(summary(results, base, elapsed))
    if args.verbose:
        print_search_logs(results, spaces, getattr(ev, "arch", None) or args.arch or ev.limits.arch)
    if path:
        kept = sorted(set(entries) - set(changed))
        print(f"wrote {path}" + (f" (kept faster stored entries for {', '.join(kept)})" if kept else ""))
        if problem.precision == "high" and spec["kind"] == "gpu" and not args.no_route:
            print(route_line(args, problem, ev.limits), flush=True)
    restarts = getattr(getattr(ev, "worker", None), "restarts", 0)
    if restarts:
        print(f"GPU worker replaced {restarts} time(s) after faults or hangs")
    if procs is not None and procs.short:  # search processes died and their share was not made up
        short = "; ".join(procs.short)
        line = f"autotune: error: {problem.name}: short of its budget ({short}); the same command resumes"
        print(line, file=sys.stderr)
        return 1
    return 0 if entries else 1


def route_line(args, problem: Problem, limits) -> str:
    """Time the Ozaki route beside the shape's best (dispatch/routes.measure), record it, say so."""
    from ..dispatch import routes
    from ..records.results import best_entry, entry_config
    from ..records.store import update_route

    if not routes.usable(problem, limits.arch):
        why = "a batch" if problem.batch > 1 else f"INT8 wgmma is Hopper's, not {limits.arch}'s"
        return f"the Ozaki route: not measured ({why})"
    _, best = best_entry(args.results, limits.slug, problem)
    try:
        m = routes.measure(problem, entry_config(best), device=args.device)
    except Exception as exc:  # noqa: BLE001 - a compile or driver fault: the families' record stands
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return f"the Ozaki route: not measured ({type(exc).__name__}: {text})"
    ok = m.pop("ok")
    update_route(args.results, limits.slug, problem, routes.NAME, m if ok else None)
    if not ok:
        worse = [r["kind"] for r in m["contract"] if any(e > x for e, x in zip(r["errors"], r["limit"], strict=True))]
        return f"the Ozaki route: misses the high contract here ({', '.join(worse)} inputs); not recorded"
    ratio = m["versus_ms"] / m["time_ms"]
    verdict = "matmul(precision='high') takes it here" if ratio > 1 else f"{m['versus']} stays"
    return (
        f"the Ozaki route: {m['moduli']} moduli (cuBLAS's advantage {m['advantage']:.2f}), {m['time_ms']:.3f} ms"
        f" against {m['versus']}'s {m['versus_ms']:.3f} ({ratio:.2f}x; cuBLAS SGEMM's {m['cublas_ms']:.3f},"
        f" {m['cublas_ms'] / m['time_ms']:.2f}x): {verdict}"
    )


def _start(args, spaces: list[Space], problem: Problem, ev, spec: dict, plan_kw: dict) -> tuple:
    """Start the search: return (the processes or None, the ordered plans or None, the baseline).

    cuBLAS is timed on its own thread (it waits on the GPU worker) while this one makes the plans,
    orders them and starts the likeliest family's first compiles (driver.plan_search), or starts the
    search processes: their start-up and the baseline overlap. The processes ask for trials only once
    the baseline is done.
    """
    from ..search.driver import plan_search
    from ..search.parallel import SearchProcesses

    procs = planned = None
    with ThreadPoolExecutor(1, thread_name_prefix="cublas") as bg:
        timing = bg.submit(ev.baseline, problem)
        try:
            if args.workers > 1:
                procs = SearchProcesses(
                    spaces, problem, spec, args.workers, ev.limits, timeout_s=args.timeout, batch=args.window, **plan_kw
                )
            else:
                planned = plan_search(spaces, problem, ev, batch=args.window, **plan_kw)
            base = timing.result()
        except BaseException:
            if procs is not None:
                procs.stop()
            raise
    return procs, planned, base


def record(args, problem: Problem, storage: str, ev, results) -> tuple:
    """Merge the families' results into the shape's record: save_search with this command line."""
    from ..records.store import save_search

    command = "autotune " + shlex.join(redact.argv(sys.argv[1:] if args.argv is None else args.argv))
    return save_search(
        args.results,
        ev.limits,
        ev.versions,
        problem,
        results,
        command=command,
        sampler=args.sampler,
        seed=args.seed,
        trials=None if args.timed_only else args.trials,
        storage=storage,
    )


def stopped_line(args, problem: Problem, storage: str, ev, fault: str, results) -> str:
    """Record what a search its storage failed under measured, and return the line that says so.

    The best of what was measured is recorded if anything verified was; the line says what failed,
    what was kept and how to go on.
    """
    kept = [r for r in results if r.best is not None]
    try:
        path = record(args, problem, storage, ev, kept)[0] if kept else None
        where = f"; the best of each family so far written to {path}" if path else ""
    except UserError as exc:  # the disk that filled up holds the results folder too
        where = f"; its record was not written ({exc})"
    return (
        f"{problem.name}: the search stopped: {fault}; the trials told before it stay in the study{where}; "
        "the same command resumes"
    )


def print_search_logs(results, spaces: list[Space], arch: str) -> None:
    """Print, for --verbose, NVRTC's whole log for each family's example compile failure.

    The study keeps 'config: reason'; the config is compiled again for its log.
    """
    families = {sp.family.name: sp.family for sp in spaces}
    for r in results:
        example = r.failures.get("compile_failed")
        if not example or r.family not in families:
            continue
        cfg = config_from_name(families[r.family], example.split(":")[0])
        if cfg is not None:
            print(f"{r.family}: NVRTC log of {cfg.name}:\n" + indent(compile_log(families[r.family], cfg, arch)))


def summary(results, base: dict, elapsed: float) -> str:
    """Return the table of each family's best against cuBLAS, printed after a shape's search."""
    head = f"{'family':<11} {'GFLOP/s':>8} {'x cuBLAS':>8} {'error':>8} {'tried':>6}  params"
    lines = ["", head, "-" * len(head)]
    for r in sorted(results, key=lambda r: -(r.best.gflops if r.best else 0)):
        if r.best is None:
            lines.append(
                f"{r.family:<11} {'-':>8} {'-':>8} {'-':>8} {r.evaluated:>6}  no correct config "
                f"({', '.join(f'{k} {v}' for k, v in r.counts.items())})"
            )
            continue
        params = " ".join(f"{k}={v}" for k, v in r.best.config.params)
        lines.append(
            f"{r.family:<11} {r.best.gflops:8.0f} {r.best.extra['ratio']:8.2f} {r.best.error:8.1e} "
            f"{r.evaluated:>6}  {params}"
        )
    for r in results:
        for status, example in r.failures.items():
            lines.append(f"{r.family}: {status} (e.g. {example})")
        if r.best is not None:
            lines += throttled(r.family, r.best.extra, r.cublas or {})
    clock = f" ({_clock(base)})" if _clock(base) else ""
    lines.append(f"cuBLAS {base['gflops']:.0f} GFLOP/s at the start{clock}; search took {elapsed:.0f} s")
    return "\n".join(lines)


def _clock(timing: dict) -> str:
    """Return '1755 MHz, 690 W' (what is known of it) for a timing whose clock was read, else ''."""
    parts = [f"{timing['sm_clock_mhz']} MHz" if "sm_clock_mhz" in timing else None,
             f"{timing['power_w']:.0f} W" if "power_w" in timing else None]  # fmt: skip
    return ", ".join(p for p in parts if p)


def throttled(family: str, best: dict, cublas: dict) -> list[str]:
    """Return a line for each of the family's re-time and its cuBLAS that ran throttled.

    Their figures are recorded as measured, and the record's entry marks them (its `throttle`).
    """
    return [
        f"{family}: {whose} ran throttled ({', '.join(t['throttle'])})"
        + (f" at {_clock(t)}" if _clock(t) else "")
        + "; the record marks it"
        for whose, t in (("the re-time", best), ("cuBLAS", cublas))
        if t.get("throttle")
    ]
