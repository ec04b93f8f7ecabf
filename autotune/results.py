"""results/<gpu-slug>/<M>x<N>x<K>.json: what was measured, how, and with what.

One file per GPU and shape, holding the best verified config of each family searched, each
entry self-contained: params, time median and spread, GFLOP/s, cuBLAS from the same run and
the ratio, error vs the reference, registers and shared memory, the GPU's limits, versions,
date and command line. Files are written to a temporary name and renamed, so a reader never
sees half a file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .types import Config, Measurement, Problem, Status, UserError
from .yamlio import read_text

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

SCHEMA = 1
_SHAPE_FILE = re.compile(r"^(\d+)x(\d+)x(\d+)(_(?:nt|tn|tt))?(_b\d+)?(_beta[-+.e0-9]+)?(_(?:high|medium))?\.json$")


def record_path(root: Path | str, gpu_slug: str, problem: Problem) -> Path:
    return Path(root) / gpu_slug / f"{problem.name}.json"


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write through a temporary file beside `path` and a rename, so a reader never sees half a
    file. The folder must exist: folders nobody asked for are not created here. On any failure
    the temporary file is removed and the error is one UserError naming the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


LOCK_NAME = ".autotune.lock"  # in each GPU's results folder


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Held around a record's read-merge-write: two searches of one shape finishing together
    would otherwise both read the old file, and the second write would drop the first's entry."""
    if fcntl is None:
        # No fcntl (Windows): no lock. Two processes writing one shape's record in one results
        # folder at the same moment may lose an entry there.
        yield
        return
    try:
        f = open(folder / LOCK_NAME, "a")
    except OSError as exc:
        raise UserError(f"{folder}: cannot write results there ({exc.strerror or exc})") from None
    with f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class _Corrupt(Exception):
    """What is wrong with a results file, said in its own words."""


def load_record(path: Path) -> dict:
    """A results file, checked enough that later code can trust its shape: the fields it reads
    have the types it expects, and `best` names one of the families it holds."""
    path = Path(path)
    text = read_text(path)  # a FIFO or /dev/zero put there is one error, not a hang
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{path}: corrupted results file (not JSON: {exc})") from None
    except RecursionError:
        raise UserError(f"{path}: corrupted results file (JSON nested too deep)") from None
    try:
        _check_record(data, path)
    except (UserError, _Corrupt) as exc:
        if str(path) in str(exc):
            raise
        raise UserError(f"{path}: corrupted results file ({exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path}: corrupted results file ({type(exc).__name__}: {exc})") from None
    return data


def _check_record(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise _Corrupt("not a JSON object")
    if data["schema"] != SCHEMA:
        raise UserError(f"{path}: results schema {data['schema']!r}, this autotune reads {SCHEMA}")
    problem = Problem(**data["problem"])
    named = _SHAPE_FILE.match(path.name)
    if named and path.stem != problem.name:
        raise _Corrupt(f"the file of {path.stem} holds {problem.name}")
    families = data["families"]
    if not isinstance(families, dict):
        raise _Corrupt("'families' is not an object")
    for fam, entry in families.items():
        if not isinstance(entry, dict):
            raise _Corrupt(f"entry {fam} is not an object")
        entry_measurement(entry)
        if entry["config"]["family"] != fam:
            raise _Corrupt(f"entry {fam} holds a {entry['config']['family']} config")
        _check_numbers(fam, entry)
    best = data.get("best")
    if families and best not in families:
        raise _Corrupt(f"'best' is {best!r}, not one of its families ({', '.join(families)})")
    if not families and best is not None:
        raise _Corrupt(f"'best' is {best!r} but it holds no families")
    if not all(isinstance(data["gpu"][k], str) for k in ("name", "slug")):
        raise _Corrupt("gpu name and slug must be strings")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_numbers(fam: str, entry: dict) -> None:
    """The numbers later code computes with: a string or NaN there would fail far from here."""
    cublas = entry.get("cublas")
    if not isinstance(cublas, dict):
        raise _Corrupt(f"entry {fam}: 'cublas' is not an object")
    for where, key, value in (
        ("", "gflops", entry.get("gflops")),
        ("", "ratio", entry.get("ratio")),
        ("", "time_ms", entry.get("time_ms")),
        ("cublas.", "gflops", cublas.get("gflops")),
    ):
        if not _number(value) or value <= 0:
            raise _Corrupt(f"entry {fam}: {where}{key} is {value!r}, not a positive number")
    for key in ("error", "time_min_ms", "time_max_ms", "time_iqr_ms"):
        value = entry.get(key)
        if value is not None and (not _number(value) or value < 0):
            raise _Corrupt(f"entry {fam}: {key} is {value!r}, not a number >= 0")
    for key in ("registers", "spill_bytes", "smem_bytes"):
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise _Corrupt(f"entry {fam}: {key} is {value!r}, not an integer >= 0")


def entry_measurement(entry: dict) -> Measurement:
    return Measurement.from_dict(entry)


def make_entry(m: Measurement, cublas: dict, *, search: dict, versions: dict, command: str, limits: dict) -> dict:
    if m.status is not Status.OK or m.gflops is None:
        raise ValueError("only verified measurements are recorded")
    entry = m.to_dict()
    extra = entry.pop("extra", {})
    if extra.get("contract"):  # a tensor-core tier's errors on each kind of input, against its limits
        entry["contract"] = extra["contract"]
    if extra.get("source"):  # the hash of the CUDA source measured (render.source_digest)
        entry["source"] = extra["source"]
    entry.update(
        cublas={k: cublas[k] for k in ("time_ms", "time_iqr_ms", "gflops", "error", "path", "paths") if k in cublas},
        ratio=m.gflops / cublas["gflops"],
        search=search,
        versions=versions,
        limits=limits,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=command,
    )
    return entry


def update_record(
    root: Path | str, gpu: dict, problem: Problem, entries: dict[str, dict], replace: bool = False
) -> tuple[Path, list[str]]:
    """Merge family entries into the shape's file; an entry replaces a stored one when faster,
    when it measures the same config again (the current code and GPU state, e.g. after a
    template edit), or with `replace`. Returns the path and the families whose entry changed."""
    path = record_path(root, gpu["slug"], problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # the results folders are the tool's own
    except OSError as exc:
        raise UserError(f"{path.parent}: cannot create the results folder ({exc.strerror or exc})") from None
    with _folder_lock(path.parent):
        data = (
            load_record(path)
            if path.exists()
            else {
                "schema": SCHEMA,
                "gpu": gpu,
                "problem": problem.as_dict(),
                "families": {},
            }
        )
        changed = []
        for fam, entry in entries.items():
            old = data["families"].get(fam)
            if replace or old is None or entry["gflops"] > old["gflops"] or entry["config"] == old["config"]:
                data["families"][fam] = entry
                changed.append(fam)
        data["gpu"] = gpu
        data["best"] = max(data["families"], key=lambda f: data["families"][f]["gflops"]) if data["families"] else None
        atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path, changed


def gpu_dirs(root: Path | str) -> list[str]:
    root = Path(root)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.json"))) if root.is_dir() else []


def iter_records(root: Path | str, gpu_slug: str) -> Iterator[tuple[Path, dict]]:
    for path in sorted((Path(root) / gpu_slug).glob("*.json")):
        if _SHAPE_FILE.match(path.name):
            yield path, load_record(path)


def resolve_gpu(root: Path | str, gpu: str | None) -> str:
    """The results folder to use: the one named (a name or slug), or the only one there is."""
    from .limits import gpu_slug

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
    raise UserError(f"results for several GPUs under {root} ({', '.join(dirs)}): pick one with --gpu")


def live_gpu_slug() -> str | None:
    """The results-folder name of this machine's GPU 0, or None without a usable GPU."""
    from .limits import gpu_slug

    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return gpu_slug(name.decode() if isinstance(name, bytes) else str(name))
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return None


def best_entry(root: Path | str, gpu_slug: str, problem: Problem, family: str | None = None) -> tuple[dict, dict]:
    """(record, entry) of the fastest stored config for this shape (optionally one family)."""
    path = record_path(root, gpu_slug, problem)
    if not path.exists():
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
    return data, max(fams.values(), key=lambda e: e["gflops"])


def entry_config(entry: dict[str, Any]) -> Config:
    return Config.make(entry["config"]["family"], entry["config"]["params"])


def stored_priors(root: Path | str, gpu_slug: str, family: str, problem: Problem, nearest: int = 3) -> list[Config]:
    """`family`'s configs stored for a GPU (another one: priors for a search here) at the `nearest`
    shapes to `problem` of its tier: those of its layout and batching first, then by distance in
    log-space (sum over M, N, K of |log ratio|). Nearest first; each as stored (not yet built
    for the problem)."""
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


def save_search(
    root: Path | str,
    limits,
    versions: dict,
    problem: Problem,
    family_results,
    *,
    command: str,
    sampler: str,
    seed: int,
    trials: int | None,
    storage: str,
) -> tuple[Path | None, list[str], dict]:
    """Record the best of each searched family (search.FamilyResult) in the shape's file."""
    from . import __version__

    gpu = {"name": limits.name, "slug": limits.slug, "arch": limits.arch}
    entries = {}
    for r in family_results:
        if r.best is None:
            continue
        entries[r.family] = make_entry(
            r.best,
            r.cublas,
            command=command,
            versions={**versions, "autotune": __version__},
            limits=limits.to_dict(),
            search={
                "sampler": sampler,
                "seed": seed,
                "trials": trials,
                "evaluated": r.evaluated,
                "valid_points": r.valid_points,
                "study": r.study_name,
                "storage": storage,
                "seconds": round(r.seconds, 1),
            },
        )
    if not entries:
        return None, [], entries
    path, changed = update_record(root, gpu, problem, entries)
    return path, changed, entries
