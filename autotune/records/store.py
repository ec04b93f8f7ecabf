"""Writing records: whole files, a search's best configs made entries and merged under a lock.

A file is written whole or not at all (`atomic_write_text`); entries (`make_entry`) are merged
into the shape's record under a folder lock (`update_record`, `save_search`); a record is checked
as a reader will see it before it is written. A record is written in schema 3 (`record_text`):
what every entry holds alike (limits, versions, often the command line and date) once, and one
line an entry, so that a results folder stays small and a diff names the entries that changed.
An entry keeps each measured float to the digits it carries (`measured_digits`: float32's 7).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core import redact
from ..core.files import default_database_url, open_regular
from ..core.types import Config, Measurement, Problem, Status, UserError, one_line
from ..gpu.nvml import FIELDS, clock_fields
from .fields import DIGITS, MAX_TEXT
from .results import load_record, parse_record, record_path
from .validate import PACKED, SCHEMA, fastest

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write `path` through a temporary file beside it and a rename: no reader sees half a file.

    The folder must exist: folders nobody asked for are not created here. On any failure the
    temporary file is removed and the error is one UserError naming the path.
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write bytes (a PNG) as atomic_write_text writes text.

    A symbolic link at `path` is replaced, not written through: the file it points to is left alone.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with os.fdopen(open_regular(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


LOCK_NAME = ".autotune.lock"  # in each GPU's results folder


# Two searches of one shape finishing together would otherwise both read the old file, and the
# second write would drop the first's entry.
@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold the folder's lock around a record's read-merge-write."""
    if fcntl is None:
        # No fcntl (Windows): no lock. Two processes writing one shape's record in one results
        # folder at the same moment may lose an entry there.
        yield
        return
    try:  # a link planted there is not followed, a pipe not waited on (files.open_regular)
        f = os.fdopen(open_regular(folder / LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab")
    except OSError as exc:
        raise UserError(f"{folder}: cannot write results there ({exc.strerror or exc})") from None
    with f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def make_entry(m: Measurement, cublas: dict, *, search: dict, versions: dict, command: str, limits: dict) -> dict:
    """Return a record's entry for a verified measurement, with cuBLAS's and how it was found.

    Raises:
        ValueError: The measurement is not verified (status OK with GFLOP/s).
    """
    if m.status is not Status.OK or m.gflops is None:
        raise ValueError("only verified measurements are recorded")
    entry = m.to_dict()
    extra = entry.pop("extra", {})
    if extra.get("contract"):  # a tensor-core tier's errors on each kind of input, against its limits
        entry["contract"] = extra["contract"]
    if extra.get("source"):  # the hash of the CUDA source measured (render.source_digest)
        entry["source"] = extra["source"]
    if extra.get("code"):  # the hash of the machine code measured (gpu.machine_code.code_digest)
        entry["code"] = extra["code"]
    entry.update(clock_fields(extra))  # the SM clock, power and throttling while it was timed
    # The command line and the storage URL as given may hold a database password.
    search = {**search, "storage": redact.url(search["storage"])} if "storage" in search else search
    kept = ("time_ms", "time_iqr_ms", "gflops", "error", "path", "paths", *FIELDS)  # FIELDS: its clock
    entry.update(
        cublas={k: cublas[k] for k in kept if k in cublas},
        ratio=m.gflops / cublas["gflops"],
        search=search,
        versions=versions,
        limits=limits,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=redact.text(command),
    )
    return _printable(measured_digits(entry))


# The measured floats an entry keeps to DIGITS significant digits, float32's. The times and their
# spreads are CUDA events' float32 milliseconds (cuBLAS's, and each of its paths', too); GFLOP/s
# and the ratio are computed from those times and carry no more; the errors, and a contract's
# errors and limits (multiples of cuBLAS's), measure float32 results. Not here: the power and a
# search's seconds (rounded to 0.1 where read), the problem's beta (an input, not a measurement).
_MEASURED = ("time_ms", "time_min_ms", "time_max_ms", "time_iqr_ms", "gflops", "error", "ratio")
_CONTRACT = ("errors", "limit", "cublas")


def measured_digits(entry: dict) -> dict:
    """Return a record's entry with its measured floats rounded to the digits they carry.

    Rounding is monotonic, so a record's orderings (min <= median <= max, an error within its
    limit, the fastest entry) hold after it; integers, text, configs and hashes are unchanged.
    """
    out = _rounded(entry, _MEASURED)
    if isinstance(out.get("cublas"), dict):
        out["cublas"] = _rounded(out["cublas"], _MEASURED)
        if isinstance(out["cublas"].get("paths"), dict):
            out["cublas"]["paths"] = _rounded(out["cublas"]["paths"], tuple(out["cublas"]["paths"]))
    if isinstance(out.get("contract"), list):
        out["contract"] = [_rounded(kind, _CONTRACT) if isinstance(kind, dict) else kind for kind in out["contract"]]
    return out


def _rounded(fields: dict, keys: tuple) -> dict:
    """Return `fields` with each float under `keys` (or in a list there) kept to DIGITS digits."""

    def digits(value: Any) -> Any:
        if isinstance(value, list):
            return [digits(v) for v in value]
        return float(f"{value:.{DIGITS}g}") if isinstance(value, float) else value

    return {k: digits(v) if k in keys else v for k, v in fields.items()}


def _printable(value: Any) -> Any:
    """Return `value` with every string (keys too) as a record may hold it.

    That is printable (an argument of the command line or a storage URL can hold a newline) and at
    most MAX_TEXT characters: what a search measured is written, not refused for the text around it.
    """
    if isinstance(value, str):
        text = one_line(value)
        return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def update_record(
    root: Path | str, gpu: dict, problem: Problem, entries: dict[str, dict], replace: bool = False
) -> tuple[Path, list[str]]:
    """Merge family entries into the shape's file; return the path and the families changed.

    An entry replaces a stored one when faster, when it measures the same config again (the current
    code and GPU state, e.g. after a template edit), or with `replace`.
    """
    path = record_path(root, gpu["slug"], problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # the results folders are the tool's own
    except OSError as exc:
        raise UserError(f"{path.parent}: cannot create the results folder ({exc.strerror or exc})") from None
    with _folder_lock(path.parent):
        data = (
            load_record(path)  # which refuses a link or a pipe there, even a link to nothing
            if os.path.lexists(path)
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
        data["best"] = fastest(data["families"])
        text = record_text(data)
        # Read back as a reader will: the tool never writes a record it would refuse, nor one
        # that reads back as other than the record merged.
        if parse_record(text, path, "not written, the record would not be valid") != json.loads(json.dumps(data)):
            raise UserError(f"{path}: not written, the record would not read back as it is")
        atomic_write_text(path, text)
    return path, changed


def update_route(root: Path | str, slug: str, problem: Problem, name: str, entry: dict | None) -> Path | None:
    """Put a route's entry (dispatch/routes.measure) in the shape's record, or take it out (None).

    Returns:
        The record's path; None where the shape has no record (a route is measured beside a
        family's best, so after the search that wrote it).
    """
    path = record_path(root, slug, problem)
    if not os.path.lexists(path):
        return None
    with _folder_lock(path.parent):
        data = load_record(path)
        routes = dict(data.get("routes") or {})
        if entry is None:
            routes.pop(name, None)
        else:
            routes[name] = entry
        data.pop("routes", None)
        if routes:
            data["routes"] = routes
        text = record_text(data)
        if parse_record(text, path, "not written, the record would not be valid") != json.loads(json.dumps(data)):
            raise UserError(f"{path}: not written, the record would not read back as it is")
        atomic_write_text(path, text)
    return path


def _same(a: Any, b: Any) -> bool:
    """Whether two values are the same JSON (1 is not 1.0 nor true, as Python's == has them)."""
    return json.dumps(a) == json.dumps(b)


def packed(data: dict) -> dict:
    """Return a record (schema 1, each entry whole) in the form it is written: schema 3.

    A field that every entry holds alike goes once under "shared" (with two entries or more: one
    entry shares with none), an entry's problem is left out where it is the record's, and a
    config's name where it is its parameters' (a third of a config's bytes, and a reader makes it
    again); validate.trusted reads it back to `data`.
    """
    own = {
        fam: {
            k: _unnamed(v) if k == "config" else v
            for k, v in entry.items()
            if not (k == "problem" and _same(v, data["problem"]))
        }
        for fam, entry in data["families"].items()
    }
    shared = {}
    if len(own) > 1:
        first, *rest = own.values()
        shared = {k: v for k, v in first.items() if all(k in e and _same(e[k], v) for e in rest)}
    own = {fam: {k: v for k, v in entry.items() if k not in shared} for fam, entry in own.items()}
    out = {}
    for key, value in data.items():
        if key == "families" and shared:
            out["shared"] = shared
        out[key] = PACKED if key == "schema" else own if key == "families" else value
    return out


def _unnamed(cfg: dict) -> dict:
    """Return a config without its name where the name is its parameters' (always, once checked)."""
    if cfg.get("name") != Config.make(cfg["family"], cfg["params"]).name:
        return cfg
    return {k: v for k, v in cfg.items() if k != "name"}


def record_text(data: dict) -> str:
    """Return a record's file text: packed, a line each field of the record and each entry."""
    line = functools.partial(json.dumps, separators=(",", ":"))
    fields = []
    for key, value in packed(data).items():
        if key == "families" and value:
            entries = ",\n".join(f"    {line(fam)}: {line(entry)}" for fam, entry in value.items())
            fields.append(f'  "families": {{\n{entries}\n  }}')
        else:
            fields.append(f"  {line(key)}: {line(value)}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


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
    from ..core.version import __version__

    gpu = _printable({"name": limits.name, "slug": limits.slug, "arch": limits.arch})
    # The default storage (search/storage.py's) is the database beside the record: left implied, no
    # tuning machine's path in a record that travels. Any other URL is kept (its password masked).
    beside = storage == default_database_url(root, limits.slug)
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
                **({} if beside else {"storage": storage}),
                "seconds": round(r.seconds, 1),
            },
        )
    if not entries:
        return None, [], entries
    path, changed = update_record(root, gpu, problem, entries)
    return path, changed, entries
