"""What a record must be to be trusted: `check_record`, every field later code reads checked (types,
signs, ranges, names, printable bounded text, bounded nesting) and the record agreeing with
itself; `fastest`, the one rule for a record's best entry. autotune.records.results says why a
record is read as untrusted, and reads it through here."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.types import Config, Measurement, Problem, Status, UserError, one_line

SCHEMA = 1
SHAPE_FILE = re.compile(r"^(\d+)x(\d+)x(\d+)(_(?:nt|tn|tt))?(_b\d+)?(_beta[-+.e0-9]+)?(_(?:high|medium))?\.json$")


class Corrupt(Exception):
    """What is wrong with a results file, said in its own words."""


_MAX_DEPTH = 16  # records nest 6 deep
MAX_TEXT = 16384  # characters in any string of a record (a command line with many shapes fits)
_MAX_GPU_NAME = 256  # cudaDeviceProp.name is a char[256]
_REL_TOL = 1e-3  # between a stored figure and the same figure computed from the others
_C_INT = 2**31 - 1

# Names as decl.py declares them, bounded; each matched whole (fullmatch: "$" would let a
# trailing newline through).
_FAMILY = re.compile(r"[a-z][a-z0-9_]{0,63}")  # family and choice names
_PARAM = re.compile(r"[A-Z][A-Z0-9_]{0,63}")  # parameter names
_CHOICE = _FAMILY
SLUG_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # limits.gpu_slug's folder names
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


def check_record(data: Any, path: Path, fault: str = "corrupted results file") -> None:
    """Whether `data` is a record this tool can trust (see the module docstring): None, or one
    UserError naming `path`, then `fault` and what is wrong."""
    try:
        _check_record(data, path)
    except (UserError, Corrupt) as exc:
        if str(path) in str(exc):
            raise UserError(one_line(str(exc))) from None
        raise UserError(one_line(f"{path}: {fault} ({exc})")) from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise UserError(one_line(f"{path}: {fault} ({type(exc).__name__}: {_show(str(exc))[1:-1]})")) from None


def _check_record(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise Corrupt("not a JSON object")
    if data["schema"] != SCHEMA:
        raise UserError(f"{path}: results schema {_show(data['schema'])}, this autotune reads {SCHEMA}")
    problem = _problem(data["problem"], "problem")
    named = SHAPE_FILE.match(path.name)
    if named and path.stem != problem.name:
        raise Corrupt(f"the file of {path.stem} holds {problem.name}")
    families = data["families"]
    if not isinstance(families, dict):
        raise Corrupt("'families' is not an object")
    for fam, entry in families.items():
        if not isinstance(fam, str) or not _FAMILY.fullmatch(fam):
            raise Corrupt(f"family {_show(fam)} is not a family name (lower_case letters, digits and '_')")
        if not isinstance(entry, dict):
            raise Corrupt(f"entry {fam} is not an object")
        _check_config(fam, entry)
        _problem(entry["problem"], f"entry {fam}: problem")
        entry_measurement(entry)
        if entry["config"]["family"] != fam:
            raise Corrupt(f"entry {fam} holds a {entry['config']['family']} config")
        _check_numbers(fam, entry)
        _check_agrees(fam, entry, problem)
        _check_limits(fam, entry)
    best = data.get("best")
    if families and best not in families:
        raise Corrupt(f"'best' is {_show(best)}, not one of its families ({', '.join(families)})")
    if not families and best is not None:
        raise Corrupt(f"'best' is {_show(best)} but it holds no families")
    if families and families[best]["gflops"] != families[fastest(families)]["gflops"]:
        top = fastest(families)
        raise Corrupt(
            f"'best' is {best} at {families[best]['gflops']:.6g} GFLOP/s, but {top} holds {families[top]['gflops']:.6g}"
        )
    _check_gpu(data["gpu"])
    _check_tree(data, "", 0)


def _problem(value: Any, where: str) -> Problem:
    if not isinstance(value, dict):
        raise Corrupt(f"{where} is {_show(value)}, not an object")
    return Problem(**value)


def _check_gpu(gpu: Any) -> None:
    if not isinstance(gpu, dict) or not all(isinstance(gpu.get(k), str) for k in ("name", "slug")):
        raise Corrupt("gpu name and slug must be strings")
    _check_text(gpu["name"], "gpu name", _MAX_GPU_NAME)
    if not SLUG_NAME.fullmatch(gpu["slug"]) or len(gpu["slug"]) > _MAX_GPU_NAME:
        raise Corrupt(f"gpu slug {_show(gpu['slug'])} is not a folder name (lower-case letters, digits and '-')")
    arch = gpu.get("arch")
    if arch is not None and (not isinstance(arch, str) or not _ARCH.fullmatch(arch)):
        raise Corrupt(f"gpu arch is {_show(arch)}, not sm_<digits> with an optional 'a'")


def _check_config(fam: str, entry: dict) -> None:
    """The config: its names and values the kind a template can take (integers within a C int,
    or a choice's name), and its name the one they give (the name is a C identifier in headers)."""
    cfg = entry["config"]
    if not isinstance(cfg, dict):
        raise Corrupt(f"entry {fam}: 'config' is not an object")
    family, params = cfg["family"], cfg["params"]
    if not isinstance(family, str) or not _FAMILY.fullmatch(family):
        raise Corrupt(f"entry {fam}: config family {_show(family)} is not a family name")
    config = Config.make(family, params)  # refuses what is neither an integer nor a string
    for name, value in config.params:
        if not _PARAM.fullmatch(name):
            raise Corrupt(f"entry {fam}: parameter {_show(name)} is not a parameter name (UPPER_CASE)")
        if isinstance(value, int) and not -_C_INT - 1 <= value <= _C_INT:
            raise Corrupt(f"entry {fam}: parameter {name}={value} is beyond a C int")
        if isinstance(value, str) and not _CHOICE.fullmatch(value):
            raise Corrupt(
                f"entry {fam}: parameter {name} must be an integer, got {_show(value)} (or the name of a "
                "choice: lower_case letters, digits and '_')"
            )
    if cfg.get("name") != config.name:
        raise Corrupt(f"entry {fam}: config name {_show(cfg.get('name'))} is not its parameters' ({config.name})")


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
        raise Corrupt(f"entry {fam}: 'cublas' is not an object")
    for where, key, value in (
        ("", "gflops", entry.get("gflops")),
        ("", "ratio", entry.get("ratio")),
        ("", "time_ms", entry.get("time_ms")),
        ("cublas.", "gflops", cublas.get("gflops")),
    ):
        if not _number(value) or value <= 0:
            raise Corrupt(f"entry {fam}: {where}{key} is {_show(value)}, not a positive number")
    if entry.get("error") is None:  # every verified measurement has one
        raise Corrupt(f"entry {fam}: error is {_show(entry.get('error'))}, not a number >= 0")
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
            raise Corrupt(f"entry {fam}: {where}{key} is {_show(value)}, not a number >= 0")
    for key, top in (("registers", 65536), ("spill_bytes", _C_INT), ("smem_bytes", _C_INT), ("repeats", _C_INT)):
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top):
            raise Corrupt(f"entry {fam}: {key} is {_show(value)}, not an integer from 0 to {top}")
    if entry["status"] != Status.OK.value:
        raise Corrupt(f"entry {fam}: status {_show(entry['status'])}; only verified results are recorded")
    for key, what in (("source", "the source"), ("code", "the machine code")):
        digest = entry.get(key)
        if digest is not None and (not isinstance(digest, str) or not _DIGEST.fullmatch(digest)):
            raise Corrupt(f"entry {fam}: {key} is {_show(digest)}, not a hash of {what}")


def _check_agrees(fam: str, entry: dict, problem: Problem) -> None:
    """The entry's figures agree with each other and with the record's problem."""
    if _problem(entry["problem"], f"entry {fam}: problem") != problem:
        raise Corrupt(f"entry {fam} was measured at {Problem(**entry['problem']).name}, not {problem.name}")
    gflops, time_ms = entry["gflops"], entry["time_ms"]
    expect = problem.flops / (time_ms * 1e6)
    if not math.isclose(gflops, expect, rel_tol=_REL_TOL):
        raise Corrupt(
            f"entry {fam}: {gflops:.6g} GFLOP/s is not its time: {time_ms:.6g} ms at {problem.name} is {expect:.6g}"
        )
    ratio = gflops / entry["cublas"]["gflops"]
    if not math.isclose(entry["ratio"], ratio, rel_tol=_REL_TOL):
        raise Corrupt(
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
        raise Corrupt(f"entry {fam}: 'limits' is not an object")
    for key, (lo, hi) in _LIMITS.items():
        value = limits.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi):
            raise Corrupt(f"entry {fam}: limits.{key} is {_show(value)}, not an integer from {lo} to {hi}")
    if "name" in limits:
        if not isinstance(limits["name"], str):
            raise Corrupt(f"entry {fam}: limits.name is {_show(limits['name'])}, not a string")
        _check_text(limits["name"], f"entry {fam}: limits.name", _MAX_GPU_NAME)
    arch = limits.get("arch")
    if arch is not None and (not isinstance(arch, str) or not _ARCH.fullmatch(arch)):
        raise Corrupt(f"entry {fam}: limits.arch is {_show(arch)}, not sm_<digits> with an optional 'a'")
    regs, top = entry.get("registers"), limits.get("max_regs_per_thread")
    if regs is not None and top is not None and regs > top:
        raise Corrupt(f"entry {fam}: {regs} registers a thread, past the device's {top}")


def _check_text(text: str, where: str, longest: int = MAX_TEXT) -> None:
    if len(text) > longest:
        raise Corrupt(f"{where} is {len(text)} characters long, more than {longest}")
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        raise Corrupt(f"{where} is {_show(text)}: holds {_show(bad)}, not printable text")


def _check_tree(value: Any, where: str, depth: int) -> None:
    """Every string (keys too) printable and bounded, every number finite, nesting bounded:
    what no field-by-field check reads is still safe to print or pass on."""
    if depth > _MAX_DEPTH:
        raise Corrupt(f"{where or 'the record'} nests deeper than {_MAX_DEPTH}")
    if isinstance(value, str):
        _check_text(value, where or "the record")
    elif isinstance(value, float) and not math.isfinite(value):
        raise Corrupt(f"{where} is {_show(value)}, not a finite number")
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise Corrupt(f"{where} is {_show(value)}, beyond a 64-bit integer")
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
