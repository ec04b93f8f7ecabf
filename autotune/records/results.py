"""Read results/<gpu-slug>/<shape>.json records, untrusted, and answer questions about a folder.

One file per GPU and shape holds the best verified config of each family searched, each entry
read self-contained (params, timings, cuBLAS's, errors, resources, the GPU's limits, versions,
date, command line; a file stores the fields its entries share once). `load_record` is the one
way in for every reader; validate.py says what a record must be, store.py writes and merges them.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.files import NotRegular, open_regular
from ..core.types import Config, Problem, UserError, one_line
from .validate import SHAPE_FILE, SLUG_NAME, Corrupt, fastest, trusted


def record_path(root: Path | str, gpu_slug: str, problem: Problem) -> Path:
    """Return the path of the record of `problem` in the GPU's folder under `root`."""
    return Path(root) / gpu_slug / f"{problem.name}.json"


# A record is a few KB (the largest committed one is under 20 KB): far more is not a record.
MAX_RECORD_BYTES = 4 * 2**20


def _read_record_text(path: Path) -> str:
    """Return the text of a record file: a regular file of at most MAX_RECORD_BYTES, in UTF-8.

    Anything else is one UserError naming it. A symbolic link is refused, not followed (a record
    linked to another file would be read, and merged into and written, as this folder's), and so
    are a device, a pipe or a folder, before anything is read from them (files.open_regular):
    /dev/zero or a FIFO cannot exhaust memory or hang a reader.
    """
    try:
        fd = open_regular(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_RECORD_BYTES:
                raise Corrupt(f"{size} bytes; a record is at most {MAX_RECORD_BYTES}")
            data = f.read(MAX_RECORD_BYTES + 1)
    except NotRegular as exc:
        raise UserError(f"{path}: not read as a results file: not a regular file ({exc.kind})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except Corrupt as exc:
        raise UserError(f"{path}: not read as a results file: {exc}") from None
    if len(data) > MAX_RECORD_BYTES:  # grew while read
        raise UserError(f"{path}: not read as a results file: more than {MAX_RECORD_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: corrupted results file (not UTF-8: {exc.reason} at byte {exc.start})") from None


def load_record(path: Path) -> dict:
    """Return a results file checked so that later code can trust it, or one UserError naming it.

    A results folder is input from outside (committed, shared, passed around), and what a record
    says reaches generated code, log lines and the dispatch model: the file is read as
    `_read_record_text` reads it, then `parse_record` makes it the record every reader gets (from
    either form of file, validate.trusted) and checks every field and that the record agrees with
    itself. Every reader, autotune.matmul included, raises the UserError: a damaged folder is not
    skipped silently.

    Returns:
        The record, its `families` in the order stored but with `best` first (so that `fastest`,
        which takes the first of equals, names it among entries that tie).
    """
    # Whether a family's parameters are in its declared domains is the family's to say: a record
    # may name a family this installation does not ship (a newer version's, or one of
    # $AUTOTUNE_TEMPLATES), and is read; the code that builds its kernels resolves each config
    # through its family (`Family.resolve`), and refuses a config its family refuses, naming the file.
    # store.update_record checks a record as this does before writing it: the tool never writes one
    # it would refuse.
    try:
        return _load_record(Path(path))
    except UserError as exc:
        raise UserError(one_line(str(exc))) from None


def _load_record(path: Path) -> dict:
    data = parse_record(_read_record_text(path), path)
    best = data.setdefault("best", None)  # absent where it holds no families (the check allows it)
    if best is not None:
        fams = data["families"]
        data["families"] = {best: fams[best], **{f: e for f, e in fams.items() if f != best}}
    return data


def parse_record(text: str, path: Path, fault: str = "corrupted results file") -> dict:
    """Return the record a file's text holds, checked; its families in the order stored.

    Raises:
        UserError: One, naming `path`, then `fault` and what is wrong.
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise UserError(f"{path}: {fault} (nested too deep)") from None
    except ValueError as exc:
        raise UserError(f"{path}: {fault} (not JSON: {exc})") from None
    return trusted(data, path, fault)


def _listing(folder: Path, what: str) -> list[str]:
    """Return the names in a folder of results, [] when there is none; an unreadable one raises."""
    # A folder that cannot be read is one UserError naming it: Path.glob skips it silently, and
    # every reader would show no results.
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise UserError(f"{folder}: cannot read {what} ({exc.strerror or exc})") from None


def gpu_dirs(root: Path | str) -> list[str]:
    """Return the GPU folders under `root`: each that holds a record, or is named so and unreadable.

    A folder named as a GPU's (limits.gpu_slug) that cannot be read is listed so that its readers
    say so rather than show no results; one of another name (lost+found) is none of autotune's.
    """
    root = Path(root)
    out = []
    for name in _listing(root, "the results folder") if root.is_dir() else []:
        try:
            if not stat.S_ISDIR(os.stat(root / name).st_mode):
                continue
            names = os.listdir(root / name)
        except OSError:
            if SLUG_NAME.fullmatch(name):
                out.append(name)
            continue
        if any(n.endswith(".json") and not n.startswith(".") for n in names):
            out.append(name)
    return out


def iter_records(root: Path | str, gpu_slug: str) -> Iterator[tuple[Path, dict]]:
    """Yield (path, record) of each record in a GPU's folder, by name.

    Raises:
        UserError: at a bad record, or a folder that cannot be read.
    """
    folder = Path(root) / gpu_slug
    for name in _listing(folder, "the GPU's results folder"):
        if SHAPE_FILE.match(name):
            yield folder / name, load_record(folder / name)


def resolve_gpu(root: Path | str, gpu: str | None) -> str:
    """Return the GPU folder to use: `gpu`'s (name or slug), else the only one, else this GPU's.

    Raises:
        UserError: No such folder, none at all, or several and none of them this GPU's (or no GPU).
    """
    from ..kernels.limits import gpu_slug

    dirs = gpu_dirs(root)
    if gpu:
        slug = gpu_slug(gpu)
        if slug not in dirs:
            raise UserError(f"no results for GPU {gpu!r} under {root}; have: {', '.join(dirs) or 'none'}")
        return slug
    if len(dirs) == 1:
        return dirs[0]
    if not dirs:
        raise UserError(f"no results under {root}: run 'autotune search' first")
    live = live_gpu_slug()
    if live in dirs:
        return live  # several GPUs' results: this machine's
    # Without a GPU, or on one of none of them, no folder is the obvious one: the user names it.
    here = "and no GPU here to choose by" if live is None else f"none of this GPU's ({live})"
    raise UserError(f"results for several GPUs under {root} ({', '.join(dirs)}), {here}: pick one with --gpu")


def live_gpu_slug() -> str | None:
    """Return the results-folder name of this machine's GPU 0, or None without a usable GPU."""
    from ..kernels.limits import gpu_slug

    try:
        from ..gpu.runner import device_info  # imports CuPy

        return gpu_slug(device_info(0)["name"])
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return None


def best_entry(root: Path | str, gpu_slug: str, problem: Problem, family: str | None = None) -> tuple[dict, dict]:
    """Return (record, entry) of the fastest stored config for this shape (of `family` if given)."""
    path = record_path(root, gpu_slug, problem)
    if not os.path.lexists(path):  # or a folder that cannot be looked into: iter_records says so
        shapes = [p.stem for p, _ in iter_records(root, gpu_slug)]
        raise UserError(f"no result for {problem.name} on {gpu_slug}; tuned shapes: {', '.join(shapes) or 'none'}")
    data = load_record(path)
    fams = data["families"]
    if family is not None:
        if family not in fams:
            raise UserError(f"{path}: no {family!r} result; has {', '.join(fams) or 'none'}")
        return data, fams[family]
    if not fams:
        raise UserError(f"{path}: holds no results")
    return data, fams[fastest(fams)]


def entry_config(entry: dict[str, Any]) -> Config:
    """Return the Config that a record's entry stores."""
    return Config.make(entry["config"]["family"], entry["config"]["params"])


def stored_priors(root: Path | str, gpu_slug: str, family: str, problem: Problem, nearest: int = 3) -> list[Config]:
    """Return `family`'s configs stored for a GPU at the `nearest` shapes to `problem`, of its tier.

    Used as priors for a search (the GPU may be another). Those of the problem's layout and
    batching come first, then by distance in log-space (sum over M, N, K of |log ratio|); each as
    stored, not yet built for the problem.
    """
    found = []
    for _path, rec in iter_records(root, gpu_slug):
        shape = Problem(**rec["problem"])
        entry = rec["families"].get(family)
        if entry is None or entry.get("status") != "ok" or shape.precision != problem.precision:
            continue
        other_form = (shape.layout != problem.layout) + ((shape.batch > 1) != (problem.batch > 1))
        pairs = ((shape.M, problem.M), (shape.N, problem.N), (shape.K, problem.K))
        found.append((other_form, sum(abs(math.log(a / b)) for a, b in pairs), shape.name, entry_config(entry)))
    return [cfg for *_, cfg in sorted(found, key=lambda f: f[:3])[:nearest]]
