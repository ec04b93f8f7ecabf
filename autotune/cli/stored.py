"""The commands over stored results: export, check, report and list, their options and output.

export writes a C header, check re-verifies and re-times, report plots, list shows families and
results.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.types import LAYOUTS, Problem, UserError
from ..kernels.counts import cached_valid, count_valid
from ..kernels.family import Family, known_families
from ..kernels.limits import profile_for_arch
from ..kernels.space import Space
from .inputs import check_output_dir, check_output_file, every_few_seconds, parse_problem
from .options import arch, device, shape_args, tolerance


def add_parsers(sub) -> None:
    """Add export, check, report and list to the subcommands `sub`."""
    _export_parser(sub)
    _check_parser(sub)
    _report_parser(sub)
    _list_parser(sub)


def _export_parser(sub) -> None:
    e = sub.add_parser(
        "export",
        help="write the best stored config as a C header",
        description="Write the best stored config for a shape and layout as a header: #defines, "
        "the kernel and host launchers: autotune_sgemm(transa, transb, m, n, k, alpha, A, lda, B, ldb, "
        "beta, C, ldc, stream) in cuBLAS's column-major convention, autotune_sgemm_row_major(...) and "
        "the contiguous autotune_sgemm(M, N, K, alpha, A, B, beta, C, stream).",
    )
    shape_args(e)
    e.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    e.add_argument("--family", metavar="F", help="best of this family instead of the overall best")
    e.add_argument(
        "--layouts",
        metavar="LIST",
        help="several layouts in one header (nn,nt,tn,tt or 'all'): each layout's best record of the shape, "
        "cuBLAS's entry points dispatching on the transposes (a drop-in for programs that call several)",
    )
    e.add_argument(
        "-o", "--output", type=Path, default=Path("tuned_sgemm.h"), help="header path (default tuned_sgemm.h)"
    )
    e.add_argument(
        "--prefix",
        metavar="NAME",
        default="autotune",
        help="what the header's names start with: NAME_sgemm(...), its kernels and namespaces; its macros "
        "and include guard upper-cased (NAME_BM); headers of different prefixes can be included in one "
        "program (default autotune: autotune_sgemm, AUTOTUNE_BM)",
    )
    _dispatch_options(e)
    e.add_argument(
        "--results",
        type=Path,
        default=None,
        help="results folder (default ./results, and the results shipped with autotune beside it)",
    )


def _dispatch_options(e) -> None:
    """Add export's options of the dispatching header (--dispatch and what it reads)."""
    e.add_argument(
        "--dispatch",
        action="store_true",
        help="one header for the GPU's whole folder (the default when no shape is given): its kernels and a "
        "dispatcher choosing per call as autotune.matmul does (a tuned shape's own kernel, else the stored "
        "config the model predicts fastest); --size, --sizes, --shapes-file or --table keep those shapes' records",
    )
    e.add_argument("--sizes", metavar="LIST", help="with --dispatch: only these shapes' records (comma list)")
    e.add_argument(
        "--kernels",
        metavar="N",
        type=_kernel_count,
        default=None,
        help="with --dispatch: hold at most N kernels (more only where the tuned shapes' own need them): "
        "those whose predicted times come nearest to the best of every config the model could choose "
        "(default 128: nvcc builds it in about four minutes); 'all': every one (the choice then "
        "matmul's at every shape of the model's grid)",
    )
    e.add_argument(
        "--library",
        type=Path,
        metavar="DIR",
        help="with --dispatch: write the header's kernels and dispatcher as the folder DIR instead of -o, a "
        "static library and CMake package (find_package(PREFIX_sgemm), or add_subdirectory(DIR)): "
        "include/PREFIX_sgemm.h declares the same entry points, src/ holds a few kernels a file so that a "
        "parallel build compiles them at once",
    )
    e.add_argument("--shapes-file", type=Path, metavar="FILE", help="with --dispatch: only the shapes listed")
    e.add_argument("--table", action="store_true", help="with --dispatch: only the records of search --table's shapes")


def _check_parser(sub) -> None:
    c = sub.add_parser(
        "check",
        help="regression check of stored results (exit 1 on a regression)",
        description="Re-render, re-compile, re-verify and re-time every stored result for "
        "this GPU; exit 1 when one became incorrect or slower than recorded beyond --tolerance "
        "(a slow re-time that ran throttled, or below the recorded SM clock, is timed once more "
        "and the faster kept). --static does the part that needs no GPU.",
    )
    c.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    c.add_argument(
        "--tolerance",
        type=tolerance,
        default=0.05,
        help="allowed slow-down fraction, from 0 to below 1 (default 0.05: 5%% slower fails)",
    )
    c.add_argument(
        "--static",
        action="store_true",
        help=(
            "no GPU: render, filter and compile each stored config; its machine code must be the one"
            " measured (the record's code digest), with its registers and shared memory"
        ),
    )
    c.add_argument("--device", type=device, default=0, help="CUDA device index (default 0)")
    c.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")


def _report_parser(sub) -> None:
    rp = sub.add_parser(
        "report",
        help="PNG plots and a Markdown page of stored results and studies",
        description="Plots (GFLOP/s per trial with the cuBLAS line, each study's best so far against "
        "trials and wall time, parameter importance, best per family, GFLOP/s vs shape against cuBLAS) "
        "and report.md, from results/<gpu>/.",
    )
    rp.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    rp.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")
    rp.add_argument("-o", "--output", type=Path, help="output folder (default results/<gpu>/report)")


def _list_parser(sub) -> None:
    ls = sub.add_parser(
        "list",
        help="families, their spaces, and stored results",
        description="List families (parameters, space size, valid points for a profile) and stored results.",
    )
    ls.add_argument("--arch", type=arch, metavar="SM", help="limits profile for counting valid points (default sm_90)")
    ls.add_argument(
        "--count",
        action="store_true",
        help="count the valid points of every space now (a few seconds for all); the counts "
        "are cached per template, space and limits, and shown from the cache otherwise",
    )
    ls.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")


def cmd_export(args) -> int:
    """Run `autotune export`: write the best stored config for a shape as a header."""
    from ..records.export import check_prefix, export
    from ..records.results import resolve_gpu

    check_prefix(args.prefix)
    if _dispatching(args):
        return _export_dispatch(args)
    problem = parse_problem(args)
    layouts = _layout_list(args.layouts) if args.layouts else None
    if layouts and args.layout != "nn":
        raise UserError("give --layout or --layouts, not both")
    root = _export_root(args)
    slug = resolve_gpu(root, args.gpu)
    check_output_file(args.output)
    path, entry = export(root, slug, problem, args.output, args.family, layouts, args.prefix)
    if layouts and len(layouts) > 1:
        print(f"wrote {path}: layouts {' '.join(layouts)} of {problem.with_layout('nn').name} on {slug}")
        return 0
    print(
        f"wrote {path}: {entry['config']['name']} ({entry['gflops']:.0f} GFLOP/s, "
        f"{entry['ratio']:.2f}x cuBLAS on {slug})"
    )
    return 0


def _dispatching(args) -> bool:
    """Whether export writes the dispatching header: --dispatch, or no shape given at all."""
    many = args.sizes is not None or args.shapes_file is not None or args.table
    one = args.size is not None or any(v is not None for v in (args.m, args.n, args.k))
    if many and not args.dispatch:
        raise UserError("--sizes, --shapes-file and --table choose the records of a --dispatch header")
    if args.kernels is not None and one and not args.dispatch:
        raise UserError("--kernels sizes a --dispatch header; a one-shape header holds its shape's kernel")
    if args.library is not None and one and not args.dispatch:
        raise UserError("--library writes a --dispatch header's library; a one-shape header is one file (-o)")
    return args.dispatch or not one


def _export_root(args) -> Path:
    """Return the folder export reads: --results, else ./results, else the shipped results."""
    from ..dispatch.table import _SHIPPED

    if args.results is not None:
        return args.results
    return Path("results") if Path("results").is_dir() else Path(_SHIPPED)


def _kernel_count(text: str) -> int | str:
    """--kernels: a count from 1, or 'all'."""
    if text.strip().lower() == "all":
        return "all"
    if not text.strip().isdigit() or not 1 <= int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count from 1 (or 'all')")
    return int(text)


def _export_dispatch(args) -> int:
    """Write the dispatching header of a GPU's records (export --dispatch)."""
    from ..dispatch.header import KERNELS, export_dispatch
    from ..records.results import resolve_gpu
    from .inputs import parse_problems

    if args.family or args.layouts:
        raise UserError("--family and --layouts choose one shape's kernels; a --dispatch header holds every layout")
    picked = args.sizes is not None or args.shapes_file is not None or args.table or args.size is not None
    shapes = parse_problems(args) if picked or args.m is not None else None
    slug = resolve_gpu(_export_root(args), args.gpu)
    kernels = KERNELS if args.kernels is None else None if args.kernels == "all" else args.kernels
    if args.library is not None:
        from ..dispatch.library import export_library

        path, d = export_library(args.results, slug, args.library, args.prefix, shapes, kernels)
    else:
        check_output_file(args.output)
        path, d = export_dispatch(args.results, slug, args.output, args.prefix, shapes, kernels)
    print(
        f"wrote {path}: {len(d.configs)} kernels, the choice of {len(d.exact) // 2} tuned shapes "
        f"and the model, for {slug}" + (f" (a static library: cmake -S {path} -B build)" if args.library else "")
    )
    return 0


def _layout_list(text: str) -> list[str]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    names = list(LAYOUTS) if names == ["all"] else names
    bad = [n for n in names if n not in LAYOUTS]
    if bad or not names:
        raise UserError(f"--layouts {text!r}: a comma list of {', '.join(LAYOUTS)} (or 'all')")
    return list(dict.fromkeys(names))


def cmd_check(args) -> int:
    """Run `autotune check` (on the GPU, or --static without one); return the exit status."""
    from ..records.check import check_gpu, check_static, format_rows
    from ..records.results import gpu_dirs, live_gpu_slug, resolve_gpu

    if not args.static and args.gpu is None and len(gpu_dirs(args.results)) > 1 and live_gpu_slug() is None:
        # Re-timing needs a GPU, whichever folder: say that, not which folder to pick.
        raise UserError("no usable GPU to re-time on; 'autotune check --static --gpu NAME' works without one")
    slug = resolve_gpu(args.results, args.gpu)
    if args.static:
        rows = check_static(args.results, slug, progress=every_few_seconds("check --static", "configs"))
    else:
        from ..search.evaluate import GPUEvaluator

        try:
            ev = GPUEvaluator(args.device)
        except RuntimeError as exc:
            raise UserError(f"no usable GPU ({exc}); 'autotune check --static' works without one") from None
        try:
            rows = check_gpu(args.results, slug, ev, args.tolerance, progress=every_few_seconds("check", "records"))
        finally:
            ev.close()
    if not rows:
        raise UserError(f"no stored results for {slug} under {args.results}")
    print(format_rows(rows))
    failed = [r for r in rows if r.status == "fail"]
    stale = sum(r.status == "stale" for r in rows)
    print(
        f"{len(rows)} checked, {len(failed)} failed"
        + (f", {stale} stale (re-time them on the GPU: autotune check)" if stale else "")
        + (" (static)" if args.static else "")
    )
    return 1 if failed else 0


def cmd_report(args) -> int:
    """Run `autotune report`: write the plots and the Markdown page."""
    from ..records.report import write_report
    from ..records.results import resolve_gpu

    slug = resolve_gpu(args.results, args.gpu)
    check_output_dir(args.output or args.results / slug / "report")
    path = write_report(args.results, slug, args.output)
    print(f"wrote {path} and its plots")
    return 0


def cmd_list(args) -> int:
    """Run `autotune list`: print the families and the stored results."""
    from ..records.results import gpu_dirs, iter_records
    from ..records.validate import fastest

    limits = profile_for_arch(args.arch)
    uncounted = []
    for name in known_families():
        fam = Family.load(name)
        sp = Space.load(fam)
        valid = count_valid(sp, limits) if args.count else cached_valid(sp, limits)
        if valid is None:
            uncounted.append(name)
        print(f"{name:<11} {'?' if valid is None else valid:>6} valid of {sp.size:<8} params {' '.join(fam.params)}")
        print(f"{'':<11} {fam.description.strip()}")
    if uncounted:
        print(
            f"? = not counted yet for {limits.name} ({', '.join(uncounted)}): 'autotune list --count' counts "
            "them once (a few seconds), a dry run too"
        )
    for slug in gpu_dirs(args.results):
        for _p, rec in iter_records(args.results, slug):
            best = fastest(rec["families"])
            if best is not None:
                b = rec["families"][best]
                print(
                    f"{slug}  {Problem(**rec['problem']).name:<16} best {b['config']['name']} "
                    f"{b['gflops']:.0f} GFLOP/s ({b['ratio']:.2f}x cuBLAS)"
                )
    return 0
