"""The command line's inputs, and the checks made before work starts.

Shapes, spaces, output paths, whether NVRTC is there, and what a run would cost.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..core.files import refuse_odd
from ..core.types import Problem, UserError
from ..core.yamlio import read_text
from ..kernels.counts import cached_valid
from ..kernels.family import Family, known_families
from ..kernels.limits import DeviceLimits, profile_for_arch
from ..kernels.space import Space, read_yaml

# `search --table`: shapes spread over the regimes a program calls, for autotune.matmul's model
# (autotune/dispatch/model.py) to choose from at shapes never tuned. Every regime has measurements near it:
# squares and odd sizes, rectangles, deep K over a small C, shallow K over a large C, a few rows or
# columns (the streaming families) and 17-256 of them (tiles too big for them), small problems.
TABLE_SHAPES = (
    "256", "512", "768", "1024", "1536", "2048", "4096", "8192", "1000", "3000", "4097",
    "4096x1024x4096", "1024x4096x4096", "8192x8192x1024", "4096x4096x256", "2048x2048x64",
    "1024x1024x8192", "256x256x16384", "64x64x65536",
    "1x4096x4096", "8x4096x4096", "16x11008x4096", "4096x1x4096", "4096x16x4096",
    "64x4096x4096", "256x4096x4096", "4096x64x4096", "4096x256x4096",
    "64", "128",
)  # fmt: skip


def int_in(lo: int, hi: int):
    """Return an argparse type: an integer from `lo` to `hi`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from {lo} to {hi}, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer from {lo} to {hi}, got {text!r}")
        return value

    return parse


def parse_problems(args) -> list[Problem]:
    """Return search's problems: one shape (--size, --m/--n/--k) or several (--sizes, ...)."""
    table = getattr(args, "table", False)
    many = [x for x in (args.sizes, args.shapes_file, TABLE_SHAPES if table else None) if x is not None]
    if not many:
        return [parse_problem(args)]
    if len(many) > 1 or args.size is not None or any(v is not None for v in (args.m, args.n, args.k)):
        raise UserError("give one of --size, --m/--n/--k, --sizes, --shapes-file or --table")
    if table:
        return [_holdable(Problem.parse(t, args.layout, args.batch, args.beta, args.precision)) for t in TABLE_SHAPES]
    if args.sizes is not None:
        texts, where = [t for t in args.sizes.split(",") if t.strip()], "--sizes"
    else:
        raw = read_shapes_file(args.shapes_file)
        texts, where = [ln.split("#")[0].strip() for ln in raw.splitlines()], str(args.shapes_file)
        texts = [t.lstrip("- ").strip() for t in texts if t]
    if not texts:
        raise UserError(f"{where}: no shapes")
    out = []
    for t in texts:
        try:
            out.append(_holdable(Problem.parse(t.strip(), args.layout, args.batch, args.beta, args.precision)))
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
    return list(dict.fromkeys(out))


def read_shapes_file(path: Path) -> str:
    """Return the text of --shapes-file (UTF-8; a pipe is read to its end)."""
    return read_text(path)


def parse_problem(args) -> Problem:
    """Return the one problem of --size or --m/--n/--k, with its layout, batch, beta and tier."""
    mnk = (args.m, args.n, args.k)
    if args.size is not None:
        if any(v is not None for v in mnk):
            raise UserError("give either --size or --m/--n/--k, not both")
        return _holdable(Problem(args.size, args.size, args.size, args.layout, args.batch, args.beta, args.precision))
    if any(v is None for v in mnk):
        raise UserError("give --size S, or all of --m, --n and --k")
    return _holdable(Problem(*mnk, args.layout, args.batch, args.beta, args.precision))


def _holdable(problem: Problem) -> Problem:
    """Return `problem`, or a UserError where no record could hold it (before a search begins)."""
    from ..records.validate import oversized

    too_large = oversized(problem)
    if too_large:
        raise UserError(too_large)
    return problem


# ---------------------------------------------------------------------------------------------


def load_spaces(args) -> list[Space]:
    """Return the spaces of the families asked for (--family, else all), --config files read."""
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
    loaded = [sp if sp is not None else Space.load(f) for f, sp in spaces.items()]
    for sp in loaded:
        sp.check_size()  # before any family is searched
        _renders(sp)
    return [sp.without_seeds() for sp in loaded] if getattr(args, "no_seeds", False) else loaded


def _renders(sp: Space) -> None:
    """Render one config of the space (its fallback, else its first seed), or raise its UserError.

    A template that fails for every config (damaged, or outside the sandbox) is then one line before
    a search makes its study, not at its first compile.
    """
    from ..kernels.render import render

    cfg = sp.fallback or (sp.seeds[0] if sp.seeds else None)
    if cfg is not None:
        render(sp.family.resolve(cfg))


# ---------------------------------------------------------------------------------------------
# Work estimates: a run estimated above ASK_ABOVE_S stops at once, says how many points and
# about how long, and asks for a smaller run or --yes.
#
# NVRTC CPU seconds per compile (sm_90, NVRTC 13.0, one at a time on a shared x86 core): tiled
# 0.2; coarse2d and vectorized mostly 0.4-2 (a few up to 10); warptile 1.5-16, median 5.
# One figure for every family, a middle one:
COMPILE_CPU_S = 3.0
# A measured trial: the default `autotune search --size 4096` (5 families x 30 trials, their
# re-times and compiles overlapped) took 62 s on an H200, 0.4 s a trial; plus its launches
# (verification and at least 5 timed ones, about 8) at the 50 TFLOP/s an H200 reaches.
TRIAL_S = 0.4
LAUNCHES_PER_TRIAL = 8
FLOP_PER_S = 50e12
ASK_ABOVE_S = 30 * 60
DEFAULT_TRIALS = 30
# --timeout without --trials: the time is the budget. make_plan caps a budget at the family's
# valid points, so a small space is measured whole and stops before its time.
UNBOUNDED_TRIALS = 10**9


def trials_of(args) -> int:
    """Return a search's trials a family: --trials, or with --timeout alone as many as it allows."""
    if args.trials is not None:
        return args.trials
    return UNBOUNDED_TRIALS if args.timeout is not None else DEFAULT_TRIALS


def duration(seconds: float) -> str:
    """Return `seconds` in words for a person: minutes, hours or days."""
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def ask_dry_run(counts: dict[str, int], sample: int | None, jobs: int) -> None:
    """Stop a dry run estimated to take over ASK_ABOVE_S, unless told to go ahead.

    Compiles do not depend on the shape: a second shape finds them in the compile cache.
    """
    per = {f: min(n, sample) if sample else n for f, n in counts.items()}
    total = sum(per.values())
    seconds = total * COMPILE_CPU_S / jobs
    if seconds <= ASK_ABOVE_S:
        return
    biggest = ", ".join(f"{f} {n:,}" for f, n in sorted(per.items(), key=lambda kv: -kv[1])[:3] if n)
    raise UserError(
        f"this dry run compiles {total:,} points ({biggest}): about {duration(seconds)} with {jobs} parallel "
        f"compiles (estimated at {COMPILE_CPU_S:g} s of CPU per NVRTC compile; tiled takes 0.2 s, warptile up "
        f"to 16 s); compile a random N per family with --sample N, or go ahead with --yes"
    )


def _without_gaps(spaces: list[Space], gaps_of, named: bool) -> list[Space]:
    """Return the spaces whose family `gaps_of` finds no gap in.

    When the user named the families, none left is an error (the first reason): several named
    for several shapes each serve the shapes they can (a shapes file mixes layouts).
    """
    out = [sp for sp in spaces if not gaps_of(sp.family)]
    if named and not out and spaces:
        raise UserError(gaps_of(spaces[0].family)[0])
    return out


def readable(spaces: list[Space], problem: Problem, named: bool) -> list[Space]:
    """Return the families that can run the problem (read its layout, run its batch).

    When the user named them, none that can is an error.
    """
    return _without_gaps(spaces, lambda fam: fam.gaps(problem), named)


def runs_on(spaces: list[Space], limits, named: bool) -> list[Space]:
    """Return the families this device can run (wgmma_tf32 needs an sm_90 GPU).

    When the user named them, none that it can is an error.
    """
    return _without_gaps(spaces, lambda fam: fam.device_gaps(limits), named)


def meant_for(spaces: list[Space], problem: Problem, named: bool) -> list[Space]:
    """Return the families a search runs for this shape.

    Those that read its layout and whose declared `suits` it meets, or all those that read it when
    the user named them (none of the named reading it is an error).
    """
    spaces = readable(spaces, problem, named)
    return spaces if named else [sp for sp in spaces if not sp.family.unsuited(problem)]


def ask_search(args, spaces: list[Space], problems: list[Problem], jobs: int) -> None:
    """Stop a search estimated to take over ASK_ABOVE_S before it starts, unless told to go ahead.

    The GPU's limits are not known yet: a family counts min(trials, its cached valid points or its
    space size).
    """
    limits = profile_for_arch(args.arch)
    per_shape = [(p, meant_for(spaces, p, bool(args.family))) for p in problems]
    most = trials_of(args)
    budget = {sp.family.name: min(most, cached_valid(sp, limits) or sp.size) for sp in spaces}
    trials = sum(budget[sp.family.name] for _, sps in per_shape for sp in sps)
    seconds = (
        sum(
            sum(budget[sp.family.name] for sp in sps)
            * max(TRIAL_S + LAUNCHES_PER_TRIAL * p.flops / FLOP_PER_S, COMPILE_CPU_S / jobs)
            for p, sps in per_shape
        )
        / args.workers
    )
    families = len({sp.family.name for _, sps in per_shape for sp in sps})
    if args.timeout is not None:  # each shape's search gets the whole timeout
        seconds = min(seconds, args.timeout * len(problems))
    if seconds <= ASK_ABOVE_S:
        return
    each = "as many trials as its time allows" if most == UNBOUNDED_TRIALS else f"up to {most:,} trials"
    raise UserError(
        f"this search measures up to {trials:,} configs ({families} families, {each} "
        f"each, {len(problems)} shape(s)): about {duration(seconds)} (estimated at {TRIAL_S:g} s a trial, as the "
        f"default 4096^3 search took on an H200, plus {LAUNCHES_PER_TRIAL} launches at 50 TFLOP/s, or "
        f"{COMPILE_CPU_S:g} s of CPU per compile over {jobs} threads when longer); lower --trials, bound it "
        f"with --timeout SEC, or go ahead with --yes"
    )


# ---------------------------------------------------------------------------------------------


def need_nvrtc() -> None:
    """Stop a command that compiles at once, in one line naming the extra, without NVRTC."""
    from ..gpu.compile import nvrtc_version

    nvrtc_version()


def live_limits(device: int) -> DeviceLimits | None:
    """Return the limits of GPU `device` as it reports them, or None without a GPU."""
    try:
        from ..gpu.runner import device_info

        info = device_info(device)
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no GPU: use a profile
        return None
    info.pop("versions", None)
    return DeviceLimits(**info)


def check_results_writable(root: Path, slug: str, problems: list[Problem], storage: str | None = None) -> None:
    """Check before any search work that the records can be written, their folder's files safe.

    The folder is made, if need be; the records the search will merge into must be readable, and
    every file it will open in the folder (the records, their lock, the SQLite storage and the files
    beside it) a regular file or absent, not a link or a pipe planted there -- not found out after
    the search. A SQLite `storage` may not be the results folder or one on its way (it would be
    made a file first).
    """
    from ..records.results import load_record, record_path
    from ..records.store import LOCK_NAME
    from ..search.sqlite import check_files, sqlite_file
    from ..search.storage import default_database

    db = sqlite_file(storage) if storage else None
    if db is not None:
        db = Path(os.path.abspath(db))
        folder = Path(os.path.abspath(root / slug))
        if db == folder or db in folder.parents:
            raise UserError(f"--storage {storage}: the results folder's own path (--results {root}); name a file in it")
    existing = root / slug
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent  # the folders below it are the tool's own: made when writing
    if not existing.is_dir():
        what = "a symbolic link to nothing" if not existing.exists() else "not a folder"
        raise UserError(f"{existing}: {what}, so no results can be written under it (--results {root})")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(
            f"cannot write results under {existing} (--results {root}): permission denied or a read-only folder"
        )
    refuse_odd(root / slug / LOCK_NAME)
    for problem in problems:
        path = record_path(root, slug, problem)
        if os.path.lexists(path):
            load_record(path)  # which refuses a link or a pipe as every reader does
    database = sqlite_file(storage) if storage else default_database(root, slug)
    if database is not None:
        check_files(database)


# ---------------------------------------------------------------------------------------------
# Where output goes: checked before any work, never a folder nobody asked for.


def writable_folder(folder: Path, what: str) -> None:
    """Check that `folder` exists and can be written; else a UserError naming `what`."""
    if not folder.is_dir():
        raise UserError(
            f"{what}: folder {folder} does not exist (it is not created)"
            if not folder.exists()
            else f"{what}: {folder} is not a folder"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{what}: cannot write into {folder} (permission denied or a read-only folder)")


def check_output_file(path: Path) -> None:
    """Check export -o FILE: a new or regular file, in a folder that exists and can be written."""
    if path.is_dir():
        raise UserError(f"-o {path}: is a folder; name the header file (e.g. {path / 'tuned_sgemm.h'})")
    if path.exists() and not path.is_file():
        raise UserError(f"-o {path}: not a regular file")
    writable_folder(path.parent, f"-o {path}")


def check_output_dir(path: Path) -> None:
    """Check report -o FOLDER: a folder that can be written, or a new one in a folder that exists.

    Not a symbolic link: the plots would go wherever it points.
    """
    if path.is_symlink() and not path.exists():
        raise UserError(f"-o {path}: a symbolic link to nothing ({os.readlink(path)})")
    if path.is_symlink():
        raise UserError(f"-o {path}: is a symbolic link; name a folder of its own")
    if path.exists() and not path.is_dir():
        raise UserError(f"-o {path}: is a file, not a folder")
    writable_folder(path if path.exists() else path.parent, f"-o {path}")


def every_few_seconds(what: str, unit: str, seconds: float = 5.0, quiet: bool = False):
    """Return a progress callback `(done, total)` that says on stderr where a long command is.

    It speaks at most once every `seconds` and at the end; stdout keeps the command's answer alone.

    Example:
        rows = check_static(root, slug, progress=every_few_seconds("check --static", "configs"))
    """
    last = [time.monotonic()]

    def say(done: int, total: int) -> None:
        now = time.monotonic()
        if not quiet and (now - last[0] >= seconds or done == total):
            last[0] = now
            print(f"{what}: {done}/{total} {unit}", file=sys.stderr, flush=True)

    return say
