"""results/<gpu-slug>/<M>x<N>x<K>.json: what was measured, how, and with what.

One file per GPU and shape, holding the best verified config of each family searched, each
entry self-contained: params, time median and spread, GFLOP/s, cuBLAS from the same run and
the ratio, error vs the reference, registers and shared memory, the GPU's limits, versions,
date and command line. Files are written to a temporary name and renamed, so a reader never
sees half a file.

A results folder is input from outside: it is committed, shared and passed around (`--results`,
`--priors`, $AUTOTUNE_RESULTS), and what a record says reaches generated code (exported headers,
rendered kernels), log lines and the dispatch model. So `load_record` is the one way in, and it
reads a record as untrusted:

- Only a regular file is read, and at most MAX_RECORD_BYTES of it. A symlink is followed, but
  only to a regular file (records are copied and linked around; a link to a device, a pipe or a
  folder is refused before anything is read from it, so /dev/zero or a FIFO cannot exhaust
  memory or hang a reader).
- Every field later code reads is checked: types, signs, ranges (numbers finite, sizes within a
  C int, device limits those of a real GPU), names against strict patterns (a family is a
  lower_case name, a parameter an UPPER_CASE one, its value an integer or a lower_case choice
  name, the config's name the one its parameters give). Every string, keys included, is
  printable text (no control or format characters) of bounded length; nesting is bounded.
- The record agrees with itself: each entry is of the record's problem and family, its GFLOP/s
  are its time at that shape, its ratio its GFLOP/s over cuBLAS's, and `best` names the fastest
  entry (`fastest`: every reader picks with that one function).

Whether a family's parameters are in its declared domains is the family's to say: a record may
name a family this installation does not ship (a newer version's, or one of $AUTOTUNE_TEMPLATES),
and is read; the code that builds its kernels resolves each config through its family
(`Family.resolve`), and refuses a config its family refuses, naming the file.

A record that fails any of this is one UserError naming the file, for every reader: `list`,
`export`, `check`, `report`, `search` (merging into it, or reading it for `--priors`), and
`autotune.matmul` / `autotune.load` (the call raises it, as the command line would say it; a
damaged folder is not skipped silently). `update_record` checks a record the same way before
writing it, so the tool never writes one it would refuse.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core import redact
from ..core.types import Config, Measurement, Problem, Status, UserError, one_line

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
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """atomic_write_text for bytes (a PNG). A symbolic link at `path` is replaced, not written
    through: the file it points to is left alone."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
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


# A record is a few KB (the largest committed one is under 20 KB): far more is not a record.
MAX_RECORD_BYTES = 4 * 2**20
_MAX_DEPTH = 16  # records nest 6 deep
_MAX_TEXT = 16384  # characters in any string of a record (a command line with many shapes fits)
_MAX_GPU_NAME = 256  # cudaDeviceProp.name is a char[256]
_REL_TOL = 1e-3  # between a stored figure and the same figure computed from the others
_C_INT = 2**31 - 1

# Names as decl.py declares them, bounded; each matched whole (fullmatch: "$" would let a
# trailing newline through).
_FAMILY = re.compile(r"[a-z][a-z0-9_]{0,63}")  # family and choice names
_PARAM = re.compile(r"[A-Z][A-Z0-9_]{0,63}")  # parameter names
_CHOICE = _FAMILY
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # limits.gpu_slug's folder names
_ARCH = re.compile(r"sm_[0-9]{1,4}a?")
_DIGEST = re.compile(r"[0-9a-f]{1,64}")  # render.source_digest, gpu.machine_code.code_digest

# Device limits a record may hold (limits.DeviceLimits' integer fields), each within what a GPU
# could have: the model divides by several, and zero or a negative count is no device.
_LIMITS = {
    "sm_count": (1, 4096),
    "warp_size": (1, 1024),
    "max_threads_per_block": (1, 65536),
    "smem_per_block": (1, 2**30),
    "smem_per_block_optin": (1, 2**30),
    "smem_per_sm": (1, 2**30),
    "regs_per_block": (1, 2**24),
    "regs_per_sm": (1, 2**24),
    "max_regs_per_thread": (1, 65536),
    "l2_bytes": (0, 2**40),
}


def _show(value: Any) -> str:
    """A value as an error line shows it: its repr (one line), cut short when long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _read_record_text(path: Path) -> str:
    """The text of a record file: a regular file (a symlink followed only to one) of at most
    MAX_RECORD_BYTES, in UTF-8. Anything else is one UserError naming it; nothing is read from a
    device, a pipe or a folder (the status is looked at before opening, and again on what was
    opened, which does not wait for a pipe's writer)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _Corrupt(f"not a regular file ({_file_kind(st.st_mode)})")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):  # replaced since the first look
                raise _Corrupt(f"not a regular file ({_file_kind(st.st_mode)})")
            if st.st_size > MAX_RECORD_BYTES:
                raise _Corrupt(f"{st.st_size} bytes; a record is at most {MAX_RECORD_BYTES}")
            data = f.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except _Corrupt as exc:
        raise UserError(f"{path}: not read as a results file: {exc}") from None
    if len(data) > MAX_RECORD_BYTES:  # grew while read
        raise UserError(f"{path}: not read as a results file: more than {MAX_RECORD_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: corrupted results file (not UTF-8: {exc.reason} at byte {exc.start})") from None


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"))
    kinds += ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def load_record(path: Path) -> dict:
    """A results file, checked as the module docstring says, so that later code can trust it;
    its `families` in the order stored, but with `best` first (so that `fastest`, which takes the
    first of equals, names it among entries that tie). Any fault is one UserError naming it, on
    one line."""
    try:
        return _load_record(Path(path))
    except UserError as exc:
        raise UserError(one_line(str(exc))) from None


def _load_record(path: Path) -> dict:
    text = _read_record_text(path)
    try:
        data = json.loads(text)
    except RecursionError:
        raise UserError(f"{path}: corrupted results file (nested too deep)") from None
    except ValueError as exc:
        raise UserError(f"{path}: corrupted results file (not JSON: {exc})") from None
    check_record(data, path)
    best = data["best"]
    if best is not None:
        fams = data["families"]
        data["families"] = {best: fams[best], **{f: e for f, e in fams.items() if f != best}}
    return data


def check_record(data: Any, path: Path, fault: str = "corrupted results file") -> None:
    """Whether `data` is a record this tool can trust (see the module docstring): None, or one
    UserError naming `path`, then `fault` and what is wrong."""
    try:
        _check_record(data, path)
    except (UserError, _Corrupt) as exc:
        if str(path) in str(exc):
            raise UserError(one_line(str(exc))) from None
        raise UserError(one_line(f"{path}: {fault} ({exc})")) from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise UserError(one_line(f"{path}: {fault} ({type(exc).__name__}: {_show(str(exc))[1:-1]})")) from None


def _check_record(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise _Corrupt("not a JSON object")
    if data["schema"] != SCHEMA:
        raise UserError(f"{path}: results schema {_show(data['schema'])}, this autotune reads {SCHEMA}")
    problem = _problem(data["problem"], "problem")
    named = _SHAPE_FILE.match(path.name)
    if named and path.stem != problem.name:
        raise _Corrupt(f"the file of {path.stem} holds {problem.name}")
    families = data["families"]
    if not isinstance(families, dict):
        raise _Corrupt("'families' is not an object")
    for fam, entry in families.items():
        if not isinstance(fam, str) or not _FAMILY.fullmatch(fam):
            raise _Corrupt(f"family {_show(fam)} is not a family name (lower_case letters, digits and '_')")
        if not isinstance(entry, dict):
            raise _Corrupt(f"entry {fam} is not an object")
        _check_config(fam, entry)
        _problem(entry["problem"], f"entry {fam}: problem")
        entry_measurement(entry)
        if entry["config"]["family"] != fam:
            raise _Corrupt(f"entry {fam} holds a {entry['config']['family']} config")
        _check_numbers(fam, entry)
        _check_agrees(fam, entry, problem)
        _check_limits(fam, entry)
    best = data.get("best")
    if families and best not in families:
        raise _Corrupt(f"'best' is {_show(best)}, not one of its families ({', '.join(families)})")
    if not families and best is not None:
        raise _Corrupt(f"'best' is {_show(best)} but it holds no families")
    if families and families[best]["gflops"] != families[fastest(families)]["gflops"]:
        top = fastest(families)
        raise _Corrupt(
            f"'best' is {best} at {families[best]['gflops']:.6g} GFLOP/s, but {top} holds {families[top]['gflops']:.6g}"
        )
    _check_gpu(data["gpu"])
    _check_tree(data, "", 0)


def _problem(value: Any, where: str) -> Problem:
    if not isinstance(value, dict):
        raise _Corrupt(f"{where} is {_show(value)}, not an object")
    return Problem(**value)


def _check_gpu(gpu: Any) -> None:
    if not isinstance(gpu, dict) or not all(isinstance(gpu.get(k), str) for k in ("name", "slug")):
        raise _Corrupt("gpu name and slug must be strings")
    _check_text(gpu["name"], "gpu name", _MAX_GPU_NAME)
    if not _SLUG.fullmatch(gpu["slug"]) or len(gpu["slug"]) > _MAX_GPU_NAME:
        raise _Corrupt(f"gpu slug {_show(gpu['slug'])} is not a folder name (lower-case letters, digits and '-')")
    arch = gpu.get("arch")
    if arch is not None and (not isinstance(arch, str) or not _ARCH.fullmatch(arch)):
        raise _Corrupt(f"gpu arch is {_show(arch)}, not sm_<digits> with an optional 'a'")


def _check_config(fam: str, entry: dict) -> None:
    """The config: its names and values the kind a template can take (integers within a C int,
    or a choice's name), and its name the one they give (the name is a C identifier in headers)."""
    cfg = entry["config"]
    if not isinstance(cfg, dict):
        raise _Corrupt(f"entry {fam}: 'config' is not an object")
    family, params = cfg["family"], cfg["params"]
    if not isinstance(family, str) or not _FAMILY.fullmatch(family):
        raise _Corrupt(f"entry {fam}: config family {_show(family)} is not a family name")
    config = Config.make(family, params)  # refuses what is neither an integer nor a string
    for name, value in config.params:
        if not _PARAM.fullmatch(name):
            raise _Corrupt(f"entry {fam}: parameter {_show(name)} is not a parameter name (UPPER_CASE)")
        if isinstance(value, int) and not -_C_INT - 1 <= value <= _C_INT:
            raise _Corrupt(f"entry {fam}: parameter {name}={value} is beyond a C int")
        if isinstance(value, str) and not _CHOICE.fullmatch(value):
            raise _Corrupt(
                f"entry {fam}: parameter {name} must be an integer, got {_show(value)} (or the name of a "
                "choice: lower_case letters, digits and '_')"
            )
    if cfg.get("name") != config.name:
        raise _Corrupt(f"entry {fam}: config name {_show(cfg.get('name'))} is not its parameters' ({config.name})")


def _number(value: Any) -> bool:
    """A finite number (an integer a float holds exactly: JSON's 1e400 and 10**400 are neither)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53
    return isinstance(value, float) and math.isfinite(value)


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
            raise _Corrupt(f"entry {fam}: {where}{key} is {_show(value)}, not a positive number")
    if entry.get("error") is None:  # every verified measurement has one
        raise _Corrupt(f"entry {fam}: error is {_show(entry.get('error'))}, not a number >= 0")
    for where, key, value in (
        ("", "error", entry.get("error")),
        ("", "time_min_ms", entry.get("time_min_ms")),
        ("", "time_max_ms", entry.get("time_max_ms")),
        ("", "time_iqr_ms", entry.get("time_iqr_ms")),
        ("cublas.", "time_ms", cublas.get("time_ms")),
        ("cublas.", "time_iqr_ms", cublas.get("time_iqr_ms")),
        ("cublas.", "error", cublas.get("error")),
    ):
        if value is not None and (not _number(value) or value < 0):
            raise _Corrupt(f"entry {fam}: {where}{key} is {_show(value)}, not a number >= 0")
    for key, top in (("registers", 65536), ("spill_bytes", _C_INT), ("smem_bytes", _C_INT), ("repeats", _C_INT)):
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top):
            raise _Corrupt(f"entry {fam}: {key} is {_show(value)}, not an integer from 0 to {top}")
    if entry["status"] != Status.OK.value:
        raise _Corrupt(f"entry {fam}: status {_show(entry['status'])}; only verified results are recorded")
    for key, what in (("source", "the source"), ("code", "the machine code")):
        digest = entry.get(key)
        if digest is not None and (not isinstance(digest, str) or not _DIGEST.fullmatch(digest)):
            raise _Corrupt(f"entry {fam}: {key} is {_show(digest)}, not a hash of {what}")


def _check_agrees(fam: str, entry: dict, problem: Problem) -> None:
    """The entry's figures agree with each other and with the record's problem."""
    if _problem(entry["problem"], f"entry {fam}: problem") != problem:
        raise _Corrupt(f"entry {fam} was measured at {Problem(**entry['problem']).name}, not {problem.name}")
    gflops, time_ms = entry["gflops"], entry["time_ms"]
    expect = problem.flops / (time_ms * 1e6)
    if not math.isclose(gflops, expect, rel_tol=_REL_TOL):
        raise _Corrupt(
            f"entry {fam}: {gflops:.6g} GFLOP/s is not its time: {time_ms:.6g} ms at {problem.name} is {expect:.6g}"
        )
    ratio = gflops / entry["cublas"]["gflops"]
    if not math.isclose(entry["ratio"], ratio, rel_tol=_REL_TOL):
        raise _Corrupt(
            f"entry {fam}: ratio {entry['ratio']:.6g} is not its GFLOP/s over cuBLAS's "
            f"({gflops:.6g} / {entry['cublas']['gflops']:.6g} = {ratio:.6g})"
        )


def _check_limits(fam: str, entry: dict) -> None:
    """The device limits stored with the measurement (the model divides by some): each one
    present an integer a GPU could have, the name and arch those of a device."""
    limits = entry.get("limits")
    if limits is None:
        return
    if not isinstance(limits, dict):
        raise _Corrupt(f"entry {fam}: 'limits' is not an object")
    for key, (lo, hi) in _LIMITS.items():
        value = limits.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi):
            raise _Corrupt(f"entry {fam}: limits.{key} is {_show(value)}, not an integer from {lo} to {hi}")
    if "name" in limits:
        if not isinstance(limits["name"], str):
            raise _Corrupt(f"entry {fam}: limits.name is {_show(limits['name'])}, not a string")
        _check_text(limits["name"], f"entry {fam}: limits.name", _MAX_GPU_NAME)
    arch = limits.get("arch")
    if arch is not None and (not isinstance(arch, str) or not _ARCH.fullmatch(arch)):
        raise _Corrupt(f"entry {fam}: limits.arch is {_show(arch)}, not sm_<digits> with an optional 'a'")
    regs, top = entry.get("registers"), limits.get("max_regs_per_thread")
    if regs is not None and top is not None and regs > top:
        raise _Corrupt(f"entry {fam}: {regs} registers a thread, past the device's {top}")


def _check_text(text: str, where: str, longest: int = _MAX_TEXT) -> None:
    if len(text) > longest:
        raise _Corrupt(f"{where} is {len(text)} characters long, more than {longest}")
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        raise _Corrupt(f"{where} is {_show(text)}: holds {_show(bad)}, not printable text")


def _check_tree(value: Any, where: str, depth: int) -> None:
    """Every string (keys too) printable and bounded, every number finite, nesting bounded:
    what no field-by-field check reads is still safe to print or pass on."""
    if depth > _MAX_DEPTH:
        raise _Corrupt(f"{where or 'the record'} nests deeper than {_MAX_DEPTH}")
    if isinstance(value, str):
        _check_text(value, where or "the record")
    elif isinstance(value, float) and not math.isfinite(value):
        raise _Corrupt(f"{where} is {_show(value)}, not a finite number")
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise _Corrupt(f"{where} is {_show(value)}, beyond a 64-bit integer")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, f"a key of {where or 'the record'}")
            _check_tree(item, f"{where}.{key}" if where else key, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_tree(item, f"{where}[{i}]", depth + 1)


def fastest(families: Mapping[str, dict], usable: Callable[[str], bool] | None = None) -> str | None:
    """The family whose entry has the most GFLOP/s (among those `usable` accepts), the first in
    the record's order among equals; None when there is none. Every reader picks a record's best
    with this (a loaded record lists its `best` first), so `list`, `export` and `autotune.matmul`
    name the same entry."""
    found = [f for f in families if usable is None or usable(f)]
    return max(found, key=lambda f: families[f]["gflops"], default=None)


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
    if extra.get("code"):  # the hash of the machine code measured (gpu.machine_code.code_digest)
        entry["code"] = extra["code"]
    # The command line and the storage URL as given may hold a database password.
    search = {**search, "storage": redact.url(search["storage"])} if "storage" in search else search
    entry.update(
        cublas={k: cublas[k] for k in ("time_ms", "time_iqr_ms", "gflops", "error", "path", "paths") if k in cublas},
        ratio=m.gflops / cublas["gflops"],
        search=search,
        versions=versions,
        limits=limits,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=redact.text(command),
    )
    return _printable(entry)


def _printable(value: Any) -> Any:
    """`value` with every string (keys too) as a record may hold it: printable (an argument of the
    command line or a storage URL can hold a newline) and at most _MAX_TEXT characters. What a
    search measured is written, not refused at the end for the text around it."""
    if isinstance(value, str):
        text = one_line(value)
        return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


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
        data["best"] = fastest(data["families"])
        # Checked as a reader will see it: the tool never writes a record it would refuse.
        check_record(json.loads(json.dumps(data)), path, "not written, the record would not be valid")
        atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path, changed


def gpu_dirs(root: Path | str) -> list[str]:
    root = Path(root)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.json"))) if root.is_dir() else []


def iter_records(root: Path | str, gpu_slug: str) -> Iterator[tuple[Path, dict]]:
    """(path, record) of each record in a GPU's folder, by name; a bad one is its UserError."""
    for path in sorted((Path(root) / gpu_slug).glob("*.json")):
        if _SHAPE_FILE.match(path.name):
            yield path, load_record(path)


def resolve_gpu(root: Path | str, gpu: str | None) -> str:
    """The results folder to use: the one named (a name or slug), or the only one there is."""
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
    raise UserError(f"results for several GPUs under {root} ({', '.join(dirs)}): pick one with --gpu")


def live_gpu_slug() -> str | None:
    """The results-folder name of this machine's GPU 0, or None without a usable GPU."""
    from ..kernels.limits import gpu_slug

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
    return data, fams[fastest(fams)]


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
    from ..core.version import __version__

    gpu = _printable({"name": limits.name, "slug": limits.slug, "arch": limits.arch})
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
