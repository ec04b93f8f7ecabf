"""autotune: search, export, check, list. A thin layer over the modules; errors are one line."""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Sequence

from . import __version__
from .limits import DeviceLimits, profile_for_arch
from .space import Family, Space, known_families, read_yaml
from .types import Problem, UserError

EPILOG_SEARCH = """examples:
  autotune search --size 4096                      all families, 4096^3, this GPU
  autotune search --m 8192 --n 8192 --k 1024 --family warptile --trials 60
  autotune search --size 4096 --family vectorized --config my_space.yaml
  autotune search --size 4096 --dry-run --arch sm_90   no GPU: filter + compile every point
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        self.exit(2, f"autotune: error: {message} (see 'autotune {self.prog.split()[-1]} --help')\n"
                  if " " in self.prog else f"autotune: error: {message} (see 'autotune --help')\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=_positive_int, metavar="S", help="square problem S x S x S")
    p.add_argument("--m", type=_positive_int, help="rows of A and C")
    p.add_argument("--n", type=_positive_int, help="columns of B and C")
    p.add_argument("--k", type=_positive_int, help="columns of A, rows of B")


def _problems(args) -> list[Problem]:
    """search: one shape (--size, --m/--n/--k) or several (--sizes, --shapes-file)."""
    many = [x for x in (args.sizes, args.shapes_file) if x is not None]
    if not many:
        return [_problem(args)]
    if len(many) > 1 or args.size is not None or any(v is not None for v in (args.m, args.n, args.k)):
        raise UserError("give one of --size, --m/--n/--k, --sizes or --shapes-file")
    if args.sizes is not None:
        texts, where = [t for t in args.sizes.split(",") if t.strip()], "--sizes"
    else:
        try:
            raw = args.shapes_file.read_text()
        except OSError as exc:
            raise UserError(f"{args.shapes_file}: cannot read ({exc.strerror})") from None
        texts, where = [ln.split("#")[0].strip() for ln in raw.splitlines()], str(args.shapes_file)
        texts = [t.lstrip("- ").strip() for t in texts if t]
    if not texts:
        raise UserError(f"{where}: no shapes")
    out = []
    for t in texts:
        try:
            out.append(Problem.parse(t.strip()))
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
    return list(dict.fromkeys(out))


def _problem(args) -> Problem:
    mnk = (args.m, args.n, args.k)
    if args.size is not None:
        if any(v is not None for v in mnk):
            raise UserError("give either --size or --m/--n/--k, not both")
        return Problem(args.size, args.size, args.size)
    if any(v is None for v in mnk):
        raise UserError("give --size S, or all of --m, --n and --k")
    return Problem(*mnk)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="autotune", description="Write, check and tune strict-FP32 CUDA SGEMM kernels.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("search", help="tune kernels for a shape on this GPU and record the best",
                       description="Search each family's space with Optuna: static filter, NVRTC compile, "
                       "verify against cuBLAS, time with CUDA events; write results/<gpu>/<MxNxK>.json.",
                       epilog=EPILOG_SEARCH, formatter_class=argparse.RawDescriptionHelpFormatter)
    _shape_args(s)
    s.add_argument("--sizes", metavar="LIST", help="several shapes: comma list of N or MxNxK (e.g. 1024,2048,8192x8192x1024)")
    s.add_argument("--shapes-file", type=Path, metavar="FILE", help="several shapes: one N or MxNxK per line")
    s.add_argument("--family", nargs="+", metavar="F", help=f"families to tune (default: all; known: "
                   f"{', '.join(known_families())})")
    s.add_argument("--config", action="append", type=Path, metavar="FILE", default=[],
                   help="YAML space replacing a family's default (its 'family:' key, or the one --family)")
    s.add_argument("--trials", type=_positive_int, default=30,
                   help="distinct configs to measure per family (default 30; a resumed study counts earlier ones)")
    s.add_argument("--timeout", type=_nonneg_float, metavar="SEC", help="wall-time budget for the whole search")
    s.add_argument("--sampler", choices=["tpe", "random", "grid"], default="tpe", help="Optuna sampler (default tpe)")
    s.add_argument("--seed", type=int, default=0, help="sampler and input seed (default 0)")
    s.add_argument("--storage", metavar="URL", help="Optuna storage (default sqlite:///results/<gpu>/optuna.db)")
    s.add_argument("--arch", metavar="SM", help="compile for this arch (default: the GPU's; sm_90 for --dry-run)")
    s.add_argument("--device", type=int, default=0, help="CUDA device index (default 0; with --workers, the first)")
    s.add_argument("--workers", type=_positive_int, default=1,
                   help="worker processes on one study, worker i on device --device+i (default 1); several "
                   "hosts share a study through --storage postgresql://...")
    s.add_argument("--candidate-timeout", type=_nonneg_float, default=30.0, metavar="SEC",
                   help="a candidate taking longer is recorded as a timeout and its worker replaced (default 30)")
    s.add_argument("--replay", metavar="FILE",
                   help="evaluate from recorded measurements (JSON table) instead of a GPU: for tests and demos")
    s.add_argument("--jobs", type=_positive_int, help="parallel NVRTC compiles (default: CPU cores, at most 16)")
    s.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")
    s.add_argument("--dry-run", action="store_true",
                   help="no GPU: render, filter and compile every point; print counts and top rejection reasons")
    s.add_argument("--sample", type=_positive_int, metavar="N",
                   help="with --dry-run: compile a random N of each family's valid points (default: all)")
    s.add_argument("--quiet", action="store_true", help="no progress display")

    e = sub.add_parser("export", help="write the best stored config as a C header",
                       description="Write the best stored config for a shape as a header: #defines, the "
                       "kernel and a host launcher autotune_sgemm(M, N, K, alpha, A, B, beta, C, stream).")
    _shape_args(e)
    e.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    e.add_argument("--family", metavar="F", help="best of this family instead of the overall best")
    e.add_argument("-o", "--output", type=Path, default=Path("tuned_sgemm.h"), help="header path (default tuned_sgemm.h)")
    e.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")

    c = sub.add_parser("check", help="regression check of stored results (exit 1 on a regression)",
                       description="Re-render, re-compile, re-verify and re-time every stored result for "
                       "this GPU; exit 1 when one became incorrect or slower than recorded beyond --tolerance. "
                       "--static does the part that needs no GPU.")
    c.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    c.add_argument("--tolerance", type=_nonneg_float, default=0.05, help="allowed slow-down fraction (default 0.05)")
    c.add_argument("--static", action="store_true", help="no GPU: render, filter, compile, compare resources")
    c.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    c.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")

    rp = sub.add_parser("report", help="PNG plots and a Markdown page of stored results and studies",
                        description="Plots (GFLOP/s per trial with the cuBLAS line, parameter importance, best "
                        "per family, GFLOP/s vs shape against cuBLAS) and report.md, from results/<gpu>/.")
    rp.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    rp.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")
    rp.add_argument("-o", "--output", type=Path, help="output folder (default results/<gpu>/report)")

    ls = sub.add_parser("list", help="families, their spaces, and stored results",
                        description="List families (parameters, space size, valid points for a profile) "
                        "and stored results.")
    ls.add_argument("--arch", metavar="SM", help="limits profile for counting valid points (default sm_90)")
    ls.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")
    return parser


# ---------------------------------------------------------------------------------------------


def _spaces(args) -> list[Space]:
    families = args.family or known_families()
    for f in families:
        Family.load(f)  # unknown family -> one clear line
    spaces = {f: None for f in dict.fromkeys(families)}
    for path in args.config:
        data = read_yaml(path)
        fam = data.get("family") if isinstance(data, dict) else None
        if fam is None:
            if len(spaces) != 1:
                raise UserError(f"{path}: say which family it is for ('family:' key, or one --family)")
            fam = next(iter(spaces))
        if not isinstance(fam, str):
            raise UserError(f"{path}: 'family' must be a family name")
        if args.family and fam not in spaces:
            raise UserError(f"{path}: is for family {fam!r}, which is not among --family {' '.join(spaces)}")
        spaces[fam] = Space.from_dict(Family.load(fam), data, str(path))
    return [sp if sp is not None else Space.load(f) for f, sp in spaces.items()]


def _dry_run(args, spaces: list[Space], problem: Problem) -> int:
    from .evaluate import default_jobs, prepare

    limits = _live_limits(args.device) if args.arch is None else None
    limits = limits or profile_for_arch(args.arch)
    arch = args.arch or limits.arch
    print(f"dry run: {problem.name}, limits of {limits.name}, compiling for {arch}")
    head = (f"{'family':<11} {'points':>8} {'static ok':>9} {'compiled':>8} {'res. ok':>7}  "
            "top rejection reasons (points removed)")
    print(head + "\n" + "-" * len(head))
    empty = []
    families: dict[str, Family] = {}
    for sp in spaces:
        t0 = time.monotonic()
        en = sp.enumerate(limits)
        points = en.valid
        if args.sample and len(points) > args.sample:
            points = random.Random(args.seed).sample(points, args.sample)
        preps = prepare(points, problem, limits, arch, families, args.jobs or default_jobs())
        compiled = sum(1 for p in preps if p.measurement is None or p.measurement.status.value == "rejected")
        ok = sum(1 for p in preps if p.measurement is None)
        reasons = dict(en.rejected)
        for p in preps:
            if p.measurement is not None:
                key = p.measurement.message.split(" (")[0] if p.measurement.status.value == "rejected" else \
                    p.measurement.status.value
                key = "spills" if key.startswith("spills") else ("registers x threads > limit"
                                                                 if key.startswith("registers") else key)
                reasons[key] = reasons.get(key, 0) + 1
        top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
        print(f"{sp.family.name:<11} {en.total:>8} {len(en.valid):>9} {f'{compiled}/{len(points)}':>8} {ok:>7}  "
              + "; ".join(f"{k} ({v})" for k, v in top) + f"  [{time.monotonic() - t0:.1f}s]")
        if not ok:
            empty.append(sp.describe_empty(en) if not en.valid else
                         f"family {sp.family.name}: every statically valid point failed to compile or was rejected "
                         f"for its resources; top reasons: " + "; ".join(f"{k} ({v})" for k, v in top))
    if empty:
        raise UserError(" | ".join(empty))
    return 0


def _live_limits(device: int) -> DeviceLimits | None:
    try:
        from .gpu.runner import device_info
        info = device_info(device)
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no GPU: use a profile
        return None
    info.pop("versions", None)
    return DeviceLimits(**info)


def cmd_search(args) -> int:
    problems = _problems(args)
    spaces = _spaces(args)
    if args.dry_run:
        return max(_dry_run(args, spaces, p) for p in problems)
    from .evaluate import build_evaluator, default_jobs

    if args.replay:
        spec = {"kind": "replay", "path": args.replay, "arch": args.arch}
    else:
        spec = {"kind": "gpu", "device": args.device, "arch": args.arch, "timeout_s": args.candidate_timeout,
                "seed": args.seed, "jobs": args.jobs or default_jobs()}
    try:
        ev = build_evaluator(spec)
    except RuntimeError as exc:
        raise UserError(f"no usable GPU ({exc}); 'autotune search --dry-run' works without one") from None
    try:
        return max(_search_one(args, spaces, problem, ev, spec) for problem in problems)
    finally:
        ev.close()


def _search_one(args, spaces: list[Space], problem: Problem, ev, spec: dict) -> int:
    from .results import save_search
    from .search import Progress, default_storage, search, search_parallel

    slug = ev.limits.slug
    storage = args.storage or default_storage(args.results, slug)
    t0 = time.monotonic()
    base = ev.baseline(problem)
    print(f"{ev.limits.name}: {problem.name}, cuBLAS {base['gflops']:.0f} GFLOP/s "
          f"(strict FP32, same process), {len(spaces)} families, {args.trials} trials each"
          + (f", {args.workers} workers" if args.workers > 1 else ""), flush=True)
    progress = Progress(enabled=not args.quiet, cublas_gflops=base["gflops"])
    common = dict(gpu_slug=slug, storage=storage, trials=args.trials, sampler=args.sampler, seed=args.seed,
                  timeout_s=args.timeout, progress=progress)
    if args.workers > 1:
        results = search_parallel(spaces, problem, spec, args.workers, ev.limits, final_evaluator=ev, **common)
    else:
        results = search(spaces, problem, ev, **common)
    elapsed = time.monotonic() - t0
    command = "autotune " + shlex.join(sys.argv[1:] if args.argv is None else args.argv)
    path, changed, entries = save_search(
        args.results, ev.limits, ev.versions, problem, results, command=command, sampler=args.sampler,
        seed=args.seed, trials=args.trials, storage=storage)
    print(_summary(results, base, elapsed))
    if path:
        kept = sorted(set(entries) - set(changed))
        print(f"wrote {path}" + (f" (kept faster stored entries for {', '.join(kept)})" if kept else ""))
    restarts = getattr(getattr(ev, "worker", None), "restarts", 0)
    if restarts:
        print(f"GPU worker replaced {restarts} time(s) after faults or hangs")
    return 0 if entries else 1


def _summary(results, base: dict, elapsed: float) -> str:
    head = f"{'family':<11} {'GFLOP/s':>8} {'x cuBLAS':>8} {'error':>8} {'tried':>6}  params"
    lines = ["", head, "-" * len(head)]
    for r in sorted(results, key=lambda r: -(r.best.gflops if r.best else 0)):
        if r.best is None:
            lines.append(f"{r.family:<11} {'-':>8} {'-':>8} {'-':>8} {r.evaluated:>6}  no correct config "
                         f"({', '.join(f'{k} {v}' for k, v in r.counts.items())})")
            continue
        params = " ".join(f"{k}={v}" for k, v in r.best.config.params)
        lines.append(f"{r.family:<11} {r.best.gflops:8.0f} {r.best.extra['ratio']:8.2f} {r.best.error:8.1e} "
                     f"{r.evaluated:>6}  {params}")
    for r in results:
        for status, example in r.failures.items():
            lines.append(f"{r.family}: {status} (e.g. {example})")
    lines.append(f"cuBLAS {base['gflops']:.0f} GFLOP/s at the start; search took {elapsed:.0f} s")
    return "\n".join(lines)


def cmd_export(args) -> int:
    from .export import export
    from .results import resolve_gpu

    problem = _problem(args)
    slug = resolve_gpu(args.results, args.gpu)
    path, entry = export(args.results, slug, problem, args.output, args.family)
    print(f"wrote {path}: {entry['config']['name']} ({entry['gflops']:.0f} GFLOP/s, "
          f"{entry['ratio']:.2f}x cuBLAS on {slug})")
    return 0


def cmd_check(args) -> int:
    from .check import check_gpu, check_static, format_rows
    from .results import resolve_gpu

    slug = resolve_gpu(args.results, args.gpu)
    if args.static:
        rows = check_static(args.results, slug)
    else:
        from .evaluate import GPUEvaluator
        try:
            ev = GPUEvaluator(args.device)
        except RuntimeError as exc:
            raise UserError(f"no usable GPU ({exc}); 'autotune check --static' works without one") from None
        try:
            rows = check_gpu(args.results, slug, ev, args.tolerance)
        finally:
            ev.close()
    if not rows:
        raise UserError(f"no stored results for {slug} under {args.results}")
    print(format_rows(rows))
    failed = [r for r in rows if r.status == "fail"]
    print(f"{len(rows)} checked, {len(failed)} failed" + (" (static)" if args.static else ""))
    return 1 if failed else 0


def cmd_report(args) -> int:
    from .report import write_report
    from .results import resolve_gpu

    slug = resolve_gpu(args.results, args.gpu)
    path = write_report(args.results, slug, args.output)
    print(f"wrote {path} and its plots")
    return 0


def cmd_list(args) -> int:
    from .results import gpu_dirs, iter_records

    limits = profile_for_arch(args.arch)
    for name in known_families():
        fam = Family.load(name)
        sp = Space.load(fam)
        en = sp.enumerate(limits)
        print(f"{name:<11} {len(en.valid):>6} valid of {en.total:<8} params {' '.join(fam.params)}")
        print(f"{'':<11} {fam.description.strip()}")
    for slug in gpu_dirs(args.results):
        for _p, rec in iter_records(args.results, slug):
            b = rec["families"][rec["best"]]
            print(f"{slug}  {Problem(**rec['problem']).name:<16} best {b['config']['name']} "
                  f"{b['gflops']:.0f} GFLOP/s ({b['ratio']:.2f}x cuBLAS)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return {"search": cmd_search, "export": cmd_export, "check": cmd_check, "report": cmd_report,
                "list": cmd_list}[args.command](args)
    except UserError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autotune: interrupted (a search resumes with the same command)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
