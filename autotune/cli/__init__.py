"""autotune: search, export, check, list. A thin layer over the modules; errors are one line."""

from __future__ import annotations

import argparse
import errno
import io
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core import redact
from ..core.types import LAYOUTS, PRECISIONS, Problem, UserError, one_line
from ..core.version import __version__
from ..kernels.counts import cached_valid, count_valid
from ..kernels.limits import profile_for_arch
from ..kernels.space import Family, Space, known_families
from .fuzz import add_parser as add_fuzz_parser
from .fuzz import cmd_fuzz
from .inputs import ASK_ABOVE_S, TABLE_SHAPES, check_output_dir, check_output_file, int_in, parse_problem
from .search import cmd_search

EPILOG_SEARCH = """examples:
  autotune search --size 4096                      all families, 4096^3, this GPU
  autotune search --m 8192 --n 8192 --k 1024 --family warptile --trials 60
  autotune search --size 4096 --family vectorized --config my_space.yaml
  autotune search --size 4096 --precision high     FP32-accurate on tensor cores (3xTF32)
  autotune search --size 4096 --dry-run --sample 50   no GPU: filter every point, compile 50 a family
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        see = f"autotune {self.prog.split()[-1]} --help" if " " in self.prog else "autotune --help"
        self.exit(2, f"autotune: error: {one_line(message)} (see '{see}')\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _number(lo: float, hi: float | None = None, *, above: bool = False, below: bool = False):
    """An argparse type: a finite number from `lo` (excluded when `above`) to `hi` (excluded when
    `below`); inf, nan and anything outside are refused, not clamped."""
    bounds = f"{'>' if above else '>='} {lo:g}"
    if hi is not None:
        bounds += f" and {'below' if below else 'at most'} {hi:.12g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        inside = math.isfinite(value) and (value > lo if above else value >= lo)
        if hi is not None:
            inside = inside and (value < hi if below else value <= hi)
        if not inside:
            raise argparse.ArgumentTypeError(f"expected a number {bounds}, got {text!r}")
        return value

    return parse


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


# Seconds: at most about 31 years, below what a wait on a lock or a process accepts (threading's
# TIMEOUT_MAX, 292 years), so no value gets that far and overflows there.
_MAX_SECONDS = 1e9
_seconds = _number(0, _MAX_SECONDS)
_positive_seconds = _number(0, _MAX_SECONDS, above=True)
# check --tolerance: the slow-down fraction allowed. A config measured at x times its recorded
# GFLOP/s has changed by x - 1 > -1, so a tolerance of 1 or more could never fail a check.
_tolerance = _number(0, 1, below=True)
_seed = int_in(0, 2**32 - 1)  # what NumPy's and Optuna's generators take
_device = int_in(0, 2**31 - 1)  # a CUDA device ordinal is a C int
MAX_WORKERS = 64  # a process each, each with its own CUDA context or replayed table


_ARCH = re.compile(r"^sm_\d+a?$")


def _arch(text: str) -> str:
    if not _ARCH.match(text):
        raise argparse.ArgumentTypeError(
            f"expected sm_<digits> with an optional 'a' (e.g. sm_90, sm_90a), got {text!r}"
        )
    return text


def _shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=_positive_int, metavar="S", help="square problem S x S x S")
    p.add_argument("--m", type=_positive_int, help="rows of op(A) and C")
    p.add_argument("--n", type=_positive_int, help="columns of op(B) and C")
    p.add_argument("--k", type=_positive_int, help="columns of op(A), rows of op(B)")
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="nn",
        help="how A and B are stored, as NumPy writes the product: nn A @ B (default), nt A @ B.T "
        "(B stored N x K, as a linear layer's weight), tn A.T @ B (A stored K x M), tt A.T @ B.T; "
        "a shape may also end in _nt etc.",
    )
    p.add_argument(
        "--batch",
        type=_positive_int,
        default=1,
        metavar="B",
        help="a strided batch of B products of that shape in one launch (as cublasSgemmStridedBatched; "
        "default 1: one product); a shape may also end in _b<B>, e.g. 512_b64",
    )
    p.add_argument(
        "--beta",
        type=_finite_float,
        default=0.0,
        metavar="BETA",
        help="C = A @ B + BETA * C as timed, cuBLAS with the same beta (default 0: C written, not read; "
        "any other reads C, as an epilogue that accumulates does); the record is kept apart, its name "
        "ending in _beta<BETA>, and a shape may also end so, e.g. 4096_beta3",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="highest",
        help="the accuracy a kernel must meet, with PyTorch's names: highest (default) FP32 on the CUDA "
        "cores; high: FP32's accuracy from tensor-core products of split operands (3xTF32), each "
        "candidate's errors on uniform, normal and wide-range inputs at most 1.5x cuBLAS FP32's; medium: "
        "one TF32 product, errors at most 1.5x cuBLAS TF32's (timed against it). FP32 families serve every "
        "tier; the record's name ends in _high or _medium, and a shape may also end so, e.g. 4096_high",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="autotune", description="Write, check and tune strict-FP32 CUDA SGEMM kernels.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    s = _search_parser(sub)
    _search_control_args(s)
    _search_run_args(s)
    _export_parser(sub)
    _check_parser(sub)
    _report_parser(sub)
    _list_parser(sub)
    add_fuzz_parser(sub)
    return parser


def _search_parser(sub) -> argparse.ArgumentParser:
    """`search`: what to tune (shapes, families, spaces)."""
    s = sub.add_parser(
        "search",
        help="tune kernels for a shape on this GPU and record the best",
        description="Search each family's space with Optuna: static filter, NVRTC compile, "
        "verify against cuBLAS, time with CUDA events; write results/<gpu>/<MxNxK>.json.",
        epilog=EPILOG_SEARCH,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _shape_args(s)
    s.add_argument(
        "--sizes", metavar="LIST", help="several shapes: comma list of N or MxNxK (e.g. 1024,2048,8192x8192x1024)"
    )
    s.add_argument("--shapes-file", type=Path, metavar="FILE", help="several shapes: one N or MxNxK per line")
    s.add_argument(
        "--table",
        action="store_true",
        help=f"the representative grid of {len(TABLE_SHAPES)} shapes (squares, rectangles, deep and shallow K, a few "
        "rows or columns, small) that autotune.matmul chooses from for shapes never tuned; with --layout or "
        "--batch, in that layout or batch",
    )
    s.add_argument(
        "--family",
        nargs="+",
        metavar="F",
        help=f"families to tune (default: all; known: {', '.join(known_families())})",
    )
    s.add_argument(
        "--config",
        action="append",
        type=Path,
        metavar="FILE",
        default=[],
        help="YAML space replacing a family's default (its 'family:' key, or the one --family)",
    )
    s.add_argument(
        "--no-seeds",
        action="store_true",
        help="a cold search: leave out each family's seeds (configs measured on other GPUs, tried first by "
        "default), as on a GPU nobody has tuned for; TPE then starts from the configs a static cost model "
        "ranks best (autotune/search/cost.py); its studies are kept apart from seeded ones",
    )
    s.add_argument(
        "--priors",
        nargs="+",
        metavar="GPU",
        default=[],
        help="also try first what was tuned on these GPUs (results folder names under --results, e.g. "
        "nvidia-h100-80gb-hbm3, or paths to such folders): each family's stored configs at the 3 nearest "
        "shapes, measured here like seeds (never taken as results); those that are not valid points here "
        "are left out",
    )
    return s


def _search_control_args(s: argparse.ArgumentParser) -> None:
    """`search`: how long and how (budget, sampler, storage)."""
    s.add_argument(
        "--trials",
        type=_positive_int,
        help="distinct configs to measure per family (default 30, or with --timeout as many as its time "
        "allows; a resumed study counts earlier ones)",
    )
    s.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SEC",
        help="wall-time budget for each shape's search (each of --sizes gets it), shared out over its "
        "families; the last 40%% of a "
        "family's time (or trials, whichever comes first) goes to neighbours of its best configs",
    )
    s.add_argument("--sampler", choices=["tpe", "random", "grid"], default="tpe", help="Optuna sampler (default tpe)")
    s.add_argument("--seed", type=_seed, default=0, help="sampler and input seed, 0 to 2**32 - 1 (default 0)")
    s.add_argument("--storage", metavar="URL", help="Optuna storage (default sqlite:///results/<gpu>/optuna.db)")


def _search_run_args(s: argparse.ArgumentParser) -> None:
    """`search`: where it runs and what it prints (arch, devices, workers, dry run)."""
    s.add_argument(
        "--arch",
        type=_arch,
        metavar="SM",
        help="compile for this arch, sm_<digits>[a] (default: the GPU's; sm_90 for --dry-run)",
    )
    s.add_argument("--device", type=_device, default=0, help="CUDA device index (default 0; with --workers, the first)")
    s.add_argument(
        "--workers",
        type=int_in(1, MAX_WORKERS),
        default=1,
        help=f"worker processes on one study (at most {MAX_WORKERS}), worker i on device --device+i (default 1); "
        "several hosts share a study through --storage postgresql://...",
    )
    s.add_argument(
        "--window",
        type=_positive_int,
        help="trials in flight a worker (default: --jobs, at most an eighth of --trials, at least 8): "
        "compiled in parallel while the GPU runs the first ready; a wider window keeps more compile "
        "cores busy, and TPE asks with fewer results",
    )
    s.add_argument(
        "--candidate-timeout",
        type=_positive_seconds,
        default=30.0,
        metavar="SEC",
        help="a candidate taking longer is recorded as a timeout and its worker replaced (default 30)",
    )
    s.add_argument(
        "--replay",
        metavar="FILE",
        help="evaluate from recorded measurements (JSON table) instead of a GPU: for tests and demos",
    )
    s.add_argument("--jobs", type=_positive_int, help="parallel NVRTC compiles (default: CPU cores, at most 16)")
    s.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: render, filter and compile every point; print counts and top rejection reasons",
    )
    s.add_argument(
        "--sample",
        type=_positive_int,
        metavar="N",
        help="with --dry-run: compile a random N of each family's valid points (default: all)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress display")
    s.add_argument(
        "--verbose",
        action="store_true",
        help="print NVRTC's whole log for each kind of compile failure (the summary shows its first lines)",
    )
    s.add_argument(
        "--yes",
        action="store_true",
        help=f"go ahead with a search or dry run estimated to take over {ASK_ABOVE_S // 60} minutes "
        "(without it, such a run stops at once and says how many points and about how long)",
    )


def _export_parser(sub) -> None:
    e = sub.add_parser(
        "export",
        help="write the best stored config as a C header",
        description="Write the best stored config for a shape and layout as a header: #defines, "
        "the kernel and host launchers: autotune_sgemm(transa, transb, m, n, k, alpha, A, lda, B, ldb, "
        "beta, C, ldc, stream) in cuBLAS's column-major convention, autotune_sgemm_row_major(...) and "
        "the contiguous autotune_sgemm(M, N, K, alpha, A, B, beta, C, stream).",
    )
    _shape_args(e)
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
    e.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")


def _check_parser(sub) -> None:
    c = sub.add_parser(
        "check",
        help="regression check of stored results (exit 1 on a regression)",
        description="Re-render, re-compile, re-verify and re-time every stored result for "
        "this GPU; exit 1 when one became incorrect or slower than recorded beyond --tolerance. "
        "--static does the part that needs no GPU.",
    )
    c.add_argument("--gpu", metavar="NAME", help="results folder or GPU name (default: the only one)")
    c.add_argument(
        "--tolerance",
        type=_tolerance,
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
    c.add_argument("--device", type=_device, default=0, help="CUDA device index (default 0)")
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
    ls.add_argument("--arch", type=_arch, metavar="SM", help="limits profile for counting valid points (default sm_90)")
    ls.add_argument(
        "--count",
        action="store_true",
        help="count the valid points of every space now (a few seconds for all); the counts "
        "are cached per template, space and limits, and shown from the cache otherwise",
    )
    ls.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")


def _check_results_arg(args) -> None:
    results = getattr(args, "results", None)
    if results is None:
        return
    if results.is_symlink() and not results.exists():
        raise UserError(f"--results {results}: a symbolic link to nothing ({os.readlink(results)})")
    if results.exists() and not results.is_dir():
        raise UserError(f"--results {results}: is a file, not a folder")


def cmd_export(args) -> int:
    from ..records.export import export
    from ..records.results import resolve_gpu

    problem = parse_problem(args)
    layouts = _layout_list(args.layouts) if args.layouts else None
    if layouts and args.layout != "nn":
        raise UserError("give --layout or --layouts, not both")
    slug = resolve_gpu(args.results, args.gpu)
    check_output_file(args.output)
    path, entry = export(args.results, slug, problem, args.output, args.family, layouts)
    if layouts and len(layouts) > 1:
        print(f"wrote {path}: layouts {' '.join(layouts)} of {problem.with_layout('nn').name} on {slug}")
        return 0
    print(
        f"wrote {path}: {entry['config']['name']} ({entry['gflops']:.0f} GFLOP/s, "
        f"{entry['ratio']:.2f}x cuBLAS on {slug})"
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
    from ..records.check import check_gpu, check_static, format_rows
    from ..records.results import resolve_gpu

    slug = resolve_gpu(args.results, args.gpu)
    if args.static:
        rows = check_static(args.results, slug)
    else:
        from ..search.evaluate import GPUEvaluator

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
    stale = sum(r.status == "stale" for r in rows)
    print(
        f"{len(rows)} checked, {len(failed)} failed"
        + (f", {stale} stale (re-time them on the GPU: autotune check)" if stale else "")
        + (" (static)" if args.static else "")
    )
    return 1 if failed else 0


def cmd_report(args) -> int:
    from ..records.report import write_report
    from ..records.results import resolve_gpu

    slug = resolve_gpu(args.results, args.gpu)
    check_output_dir(args.output or args.results / slug / "report")
    path = write_report(args.results, slug, args.output)
    print(f"wrote {path} and its plots")
    return 0


def cmd_list(args) -> int:
    from ..records.results import fastest, gpu_dirs, iter_records

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


COMMANDS = {
    "search": cmd_search,
    "export": cmd_export,
    "check": cmd_check,
    "report": cmd_report,
    "list": cmd_list,
    "fuzz": cmd_fuzz,
}


class OutputLost(BaseException):
    """Standard output cannot be written (a full disk, a reader gone, a closed descriptor). A
    BaseException, as KeyboardInterrupt is: no handler meant for the command's own errors may
    swallow it and carry on writing."""

    def __init__(self, exc: OSError):
        super().__init__(exc)
        self.reason = exc.strerror or str(exc) or type(exc).__name__


class _Stdout:
    """sys.stdout while a command runs: each write or flush that fails with an OSError raises
    OutputLost, so that main can tell an output error from any other; a character the stream
    cannot encode (a file name's undecodable bytes) is written escaped instead of failing."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            enc = getattr(self._stream, "encoding", None) or "utf-8"
            return self.write(text.encode(enc, "backslashreplace").decode(enc))
        except OSError as exc:
            raise OutputLost(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputLost(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _Closed:
    """In place of a standard output that was closed before autotune started."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _hold_std_fds() -> None:
    """A standard descriptor closed at start (`autotune list >&-`) is pointed at devnull: the next
    file opened would otherwise take its number, and a print or a child process's output would
    land in it (a results file, the study database)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)


def _say(text: str, secrets: tuple[str, ...] = ()) -> None:
    if sys.stderr is None:
        return  # closed before autotune started: the exit code is all that is left
    try:
        print(f"autotune: error: {error_line(redact.text(text, secrets))}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # no stderr to say it on: the same


def _secrets(args) -> tuple[str, ...]:
    # Whatever a message quotes (a storage URL, a driver's text), no password reaches the terminal.
    return tuple(redact.secrets(getattr(args, "storage", None) or ""))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: 0 or 1 as each command says, 2 with one `autotune: error:` line for bad
    input or when standard output cannot be written, 130 when interrupted."""
    closed = sys.stdout is None
    _hold_std_fds()
    real = sys.stdout
    sys.stdout = _Stdout(_Closed() if closed else real)
    try:
        code = _main(argv)
        sys.stdout.flush()
    except OutputLost as exc:
        _say(f"cannot write to standard output ({exc.reason})")
        # What is still buffered would fail again at exit: point the descriptor at devnull
        # (Python's advice for EPIPE, signal module, "Note on SIGPIPE").
        if not closed:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, real.fileno())
                os.close(devnull)
            except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
                pass  # not a descriptor (a test's captured stream): nothing flushes it at exit
        return 2
    finally:
        sys.stdout = real
    return code


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()  # lists the families for --help, which reads AUTOTUNE_TEMPLATES
    except UserError as exc:
        _say(str(exc))
        return 2
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if args.command is None:
        parser.print_help()
        return 2
    try:
        _check_results_arg(args)
        return COMMANDS[args.command](args)
    except UserError as exc:
        _say(str(exc), _secrets(args))
        return 2
    except OSError as exc:
        # What the system refuses about a path the command line or a results folder names and no
        # check before the work foresaw (a name too long, a folder gone meanwhile): bad input
        # too, said in one line naming the path.
        name = exc.filename
        where = "" if name is None else f"{os.fsdecode(name) if isinstance(name, (str, bytes)) else name}: "
        _say(f"{where}{exc.strerror or exc}", _secrets(args))
        return 2
    except KeyboardInterrupt:
        print("autotune: interrupted (a search resumes with the same command)", file=sys.stderr)
        return 130


MAX_ERROR_CHARS = 2000  # an error is one line a person reads; anything longer quotes input whole


def error_line(message: str) -> str:
    """A message as the one line printed: control characters escaped (types.one_line: a newline
    shows as \\n), cut to MAX_ERROR_CHARS."""
    line = one_line(message)
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."
