"""Each field of a record's entry checked by its type, range and format.

The fields are the measured figures and cuBLAS's, each bounded to what a measurement can be, and
the clock each ran at where it was read; the device limits; the search that found the entry; the
versions; the date; a tensor-core tier's contract. What is wrong is Corrupt, quoting at most a
short, escaped excerpt of a value (`shown`). validate.py checks the record's structure and that
its figures agree.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

from ..core.types import Status


class Corrupt(Exception):
    """What is wrong with a results file, said in its own words."""


C_INT = 2**31 - 1
INT64 = 2**63 - 1
# What a measurement can be. GFLOP/s are bounded as a replay table's are (search/replay.py), so
# that a replayed search writes records this tool reads back: no GPU comes within orders of
# magnitude of either bound. A median launch of eleven days is no kernel a search times.
GFLOPS_MAX = 1e12
TIME_MAX_MS = 1e9
ERROR_MAX = 1.0  # a relative error: a verified result's is near 1e-6, and 1 is all wrong
SECONDS_MAX = 1e9  # a search's duration
# Significant digits a record keeps of a measured float (store.measured_digits: float32's), and the
# most that rounding to them moves a value, as a fraction of it: checks between stored figures allow it.
DIGITS = 7
ROUNDING = 0.5 * 10.0 ** (1 - DIGITS)
MAX_GPU_NAME = 256  # cudaDeviceProp.name is a char[256]
MAX_TEXT = 16384  # characters in any string of a record (a command line with many shapes fits)
_MAX_VERSION = 64
_MAX_CONTRACT = 16  # kinds of input a contract lists (3 today)
# A timing's clock (gpu.nvml.FIELDS): an SM clock in MHz (GPUs run near 2000), a board's power
# in W (an H100 SXM draws up to 700), and the reasons the clock was held down (5 are named).
SM_CLOCK_MAX_MHZ = 20000
POWER_MAX_W = 100000
_MAX_THROTTLES = 16
_CONTRACT_MAX = 2.0  # its relative errors: at most 1, and a limit 1.5 times cuBLAS's

# Names as decl.py declares them, bounded; each matched whole (fullmatch: "$" would let a
# trailing newline through).
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")  # family, choice, sampler, version and input kind names
ARCH = re.compile(r"sm_[0-9]{1,4}a?")
_DIGEST = re.compile(r"[0-9a-f]{1,64}")  # render.source_digest, gpu.machine_code.code_digest
_STUDY_KEY = re.compile(r"[0-9a-f]{1,64}")  # the last part of studies.study_name

# Device limits a record may hold (limits.DeviceLimits' integer fields), each within what a GPU
# could have: the model divides by several, and zero or a negative count is no device.
LIMITS = {
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
    "threads_per_sm": (1, 65536),
    "blocks_per_sm": (1, 65536),
}
# Pairs of limits of which the first is never above the second on a device.
_LIMITS_ORDER = (
    ("smem_per_block", "smem_per_block_optin"),
    ("smem_per_block_optin", "smem_per_sm"),
    ("regs_per_block", "regs_per_sm"),
    ("max_regs_per_thread", "regs_per_block"),
    ("max_threads_per_block", "threads_per_sm"),
)


def shown(value: Any) -> str:
    """Return a value as an error line shows it: its repr (escaped, one line), cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def number(value: Any) -> bool:
    """Whether `value` is a finite number (an integer that a float holds exactly: not 10**400)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53
    return isinstance(value, float) and math.isfinite(value)


def positive(where: str, value: Any, top: float) -> None:
    """Check that `value` is a positive number at most `top`."""
    if not number(value) or value <= 0:
        raise Corrupt(f"{where} is {shown(value)}, not a positive number")
    if value > top:
        raise Corrupt(f"{where} is {value:.6g}, more than {top:g}: no measurement")


def not_negative(where: str, value: Any, top: float, optional: bool = True) -> None:
    """Check that `value` is a number from 0 to `top` (or None, when `optional`)."""
    if value is None and optional:
        return
    if not number(value) or value < 0:
        raise Corrupt(f"{where} is {shown(value)}, not a number >= 0")
    if value > top:
        raise Corrupt(f"{where} is {value:.6g}, more than {top:g}: no measurement")


def integer(where: str, value: Any, lo: int, hi: int, optional: bool = True) -> None:
    """Check that `value` is an integer from `lo` to `hi` (or None, when `optional`)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Corrupt(f"{where} is {shown(value)}, not an integer from {lo} to {hi}")


def text(value: str, where: str, longest: int = MAX_TEXT) -> None:
    """Check that `value` is a printable string of at most `longest` characters."""
    if len(value) > longest:
        raise Corrupt(f"{where} is {len(value)} characters long, more than {longest}")
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise Corrupt(f"{where} is {shown(value)}: holds {shown(bad)}, not printable text")


def matching(where: str, value: Any, pattern: re.Pattern, what: str, optional: bool = True) -> None:
    """Check that `value` is a string matching `pattern` whole (or None, when `optional`)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise Corrupt(f"{where} is {shown(value)}, not {what}")


def obj(where: str, value: Any, optional: bool = True) -> dict:
    """Return `value` when an object ({} when absent and `optional`), else raise Corrupt."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise Corrupt(f"{where} is not an object")
    return value


def check_measured(fam: str, entry: dict) -> None:
    """Check a measurement's figures and cuBLAS's beside them, clocks too; status, message, digests.

    They are the numbers later code computes with (a string or NaN there would fail far from here),
    each within what a measurement can be, the time's median between its extremes.
    """
    at = f"entry {fam}: "
    cublas = entry.get("cublas")
    if not isinstance(cublas, dict):
        raise Corrupt(f"{at}'cublas' is not an object")
    positive(f"{at}gflops", entry.get("gflops"), GFLOPS_MAX)
    positive(f"{at}ratio", entry.get("ratio"), math.inf)  # bounded by the two it is the quotient of
    positive(f"{at}time_ms", entry.get("time_ms"), TIME_MAX_MS)
    positive(f"{at}cublas.gflops", cublas.get("gflops"), GFLOPS_MAX)
    not_negative(f"{at}error", entry.get("error"), ERROR_MAX, optional=False)  # every verified result has one
    for key in ("time_min_ms", "time_max_ms", "time_iqr_ms"):
        not_negative(f"{at}{key}", entry.get(key), TIME_MAX_MS)
    for key in ("time_ms", "time_iqr_ms"):
        not_negative(f"{at}cublas.{key}", cublas.get(key), TIME_MAX_MS)
    not_negative(f"{at}cublas.error", cublas.get("error"), ERROR_MAX)
    for key, top in (("registers", 65536), ("spill_bytes", C_INT), ("smem_bytes", C_INT), ("repeats", C_INT)):
        integer(f"{at}{key}", entry.get(key), 0, top)
    if entry["status"] != Status.OK.value:
        raise Corrupt(f"{at}status {shown(entry['status'])}; only verified results are recorded")
    if not isinstance(entry.get("message", ""), str):
        raise Corrupt(f"{at}message is {shown(entry['message'])}, not text")
    for key, what in (("source", "the source"), ("code", "the machine code")):
        matching(f"{at}{key}", entry.get(key), _DIGEST, f"a hash of {what}")
    _check_cublas_paths(at, cublas)
    check_clock(at, entry)
    check_clock(f"{at}cublas.", cublas)


def check_clock(at: str, timing: dict) -> None:
    """Check a timing's clock where it has one: SM clock, power and throttle reasons (all optional).

    Records from before the clock was read have none, and are as valid.
    """
    integer(f"{at}sm_clock_mhz", timing.get("sm_clock_mhz"), 1, SM_CLOCK_MAX_MHZ)
    not_negative(f"{at}power_w", timing.get("power_w"), POWER_MAX_W)
    throttle = timing.get("throttle")
    if throttle is None:
        return
    if not isinstance(throttle, list) or len(throttle) > _MAX_THROTTLES:
        raise Corrupt(f"{at}throttle is {shown(throttle)}, not a list of at most {_MAX_THROTTLES} reasons")
    for i, reason in enumerate(throttle):
        matching(f"{at}throttle[{i}]", reason, NAME, "the name of a reason the clock was held down", optional=False)


def check_spread(fam: str, entry: dict) -> None:
    """Check the median time lies between the fastest and slowest, the spread within theirs."""
    at = f"entry {fam}: "
    lo, mid, hi, iqr = (entry.get(k) for k in ("time_min_ms", "time_ms", "time_max_ms", "time_iqr_ms"))
    # Rounding (DIGITS) keeps min <= median <= max, but the spread and the two it lies within each
    # move, by a fraction ROUNDING of at most the slowest time: three of those, and a margin.
    slack = 4 * ROUNDING * max(mid, hi or 0)
    if (lo is not None and lo > mid + slack) or (hi is not None and hi < mid - slack):
        raise Corrupt(f"{at}time_ms {mid:.6g} is not between time_min_ms {lo} and time_max_ms {hi}")
    if None not in (lo, hi, iqr) and iqr > hi - lo + slack:
        raise Corrupt(f"{at}time_iqr_ms {iqr:.6g} is more than time_max_ms - time_min_ms ({hi - lo:.6g})")


def _check_cublas_paths(at: str, cublas: dict) -> None:
    """Check cuBLAS's entry points timed (`paths`: each one's median ms) and the one used."""
    matching(f"{at}cublas.path", cublas.get("path"), NAME, "the name of a cuBLAS entry point")
    paths = obj(f"{at}cublas.paths", cublas.get("paths"))
    for name, ms in paths.items():
        matching(f"{at}a key of cublas.paths", name, NAME, "the name of a cuBLAS entry point", optional=False)
        positive(f"{at}cublas.paths.{name}", ms, TIME_MAX_MS)
    path, time_ms = cublas.get("path"), cublas.get("time_ms")
    if paths and path is not None and (path not in paths or (time_ms is not None and paths[path] != time_ms)):
        raise Corrupt(f"{at}cublas.time_ms is not the time cublas.paths gives its path {path}")


def check_limits(fam: str, entry: dict, gpu: dict) -> None:
    """Check the device limits stored with the measurement (the model divides by some).

    Each is present, an integer a GPU could have, in the order a device has them; the name and arch
    are those of the record's GPU; the entry's registers and shared memory are within them.
    """
    at = f"entry {fam}: "
    limits = entry.get("limits")
    if limits is None:
        return
    if not isinstance(limits, dict):
        raise Corrupt(f"{at}'limits' is not an object")
    for key, (lo, hi) in LIMITS.items():
        integer(f"{at}limits.{key}", limits.get(key), lo, hi)
    for small, large in _LIMITS_ORDER:
        if None not in (limits.get(small), limits.get(large)) and limits[small] > limits[large]:
            raise Corrupt(f"{at}limits.{small} {limits[small]} is more than limits.{large} {limits[large]}")
    if isinstance(limits.get("name"), str):
        text(limits["name"], f"{at}limits.name", MAX_GPU_NAME)
    matching(f"{at}limits.arch", limits.get("arch"), ARCH, "sm_<digits> with an optional 'a'")
    for key in ("name", "arch"):  # the device measured on is the record's GPU (a null arch: unknown)
        if limits.get(key) is not None and gpu.get(key) is not None and limits[key] != gpu[key]:
            raise Corrupt(f"{at}limits.{key} is {shown(limits[key])}, not the record's gpu {key}")
    for key, top, what in (
        ("registers", "max_regs_per_thread", "registers a thread"),
        ("smem_bytes", "smem_per_block_optin", "bytes of shared memory a block"),
    ):
        used, most = entry.get(key), limits.get(top)
        if used is not None and most is not None and used > most:
            raise Corrupt(f"entry {fam}: {used} {what}, past the device's {most}")


def check_search(fam: str, entry: dict, slug: str, shape: str) -> None:
    """Check how the entry was found: sampler and seed, budget and what it measured, study, storage.

    The study is named after the record's GPU, shape and family; the storage is masked; and the
    search's duration.
    """
    at = f"entry {fam}: search."
    search = obj(f"entry {fam}: 'search'", entry.get("search"))
    matching(f"{at}sampler", search.get("sampler"), NAME, "a sampler's name")
    integer(f"{at}seed", search.get("seed"), 0, 2**32 - 1)
    integer(f"{at}trials", search.get("trials"), 1, INT64)
    integer(f"{at}evaluated", search.get("evaluated"), 0, INT64)
    integer(f"{at}valid_points", search.get("valid_points"), 0, INT64)
    not_negative(f"{at}seconds", search.get("seconds"), SECONDS_MAX)
    if not isinstance(search.get("storage", ""), str):
        raise Corrupt(f"{at}storage is {shown(search['storage'])}, not text")
    study = search.get("study")
    if isinstance(study, str):
        text(study, f"{at}study")
    if study is not None:
        parts = study.split("/") if isinstance(study, str) else []
        if parts[:3] != [slug, shape, fam] or len(parts) != 4 or not _STUDY_KEY.fullmatch(parts[3]):
            raise Corrupt(f"{at}study is {shown(study)}, not a study of {slug}/{shape}/{fam}")


def check_provenance(fam: str, entry: dict) -> None:
    """Check the versions measured with, the date, the command line and the tier's contract.

    Versions are names to short text, or a flag (a replay's); the date is ISO 8601 with its time zone.
    """
    at = f"entry {fam}: "
    for name, version in obj(f"{at}'versions'", entry.get("versions")).items():
        matching(f"{at}a key of versions", name, NAME, "a name", optional=False)
        if isinstance(version, str):
            text(version, f"{at}versions.{name}")
        if not (isinstance(version, (str, bool)) and len(str(version)) <= _MAX_VERSION):
            raise Corrupt(f"{at}versions.{name} is {shown(version)}, not a version")
    date = entry.get("date")
    if isinstance(date, str):
        text(date, f"{at}date")
    if date is not None:
        try:
            when = _dt.datetime.fromisoformat(date) if isinstance(date, str) and len(date) <= 64 else None
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise Corrupt(f"{at}date is {shown(date)}, not an ISO 8601 date and time with its time zone")
    if not isinstance(entry.get("command", ""), str):
        raise Corrupt(f"{at}command is {shown(entry['command'])}, not text")
    _check_contract(at, entry.get("contract"))


def _check_contract(at: str, contract: Any) -> None:
    """Check a tensor-core tier's errors on each kind of input, each within its limit.

    The limit is not below cuBLAS's (it is a multiple of it).
    """
    if contract is None:
        return
    if not isinstance(contract, list) or len(contract) > _MAX_CONTRACT:
        raise Corrupt(f"{at}contract is not a list of at most {_MAX_CONTRACT} kinds of input")
    for i, kind in enumerate(contract):
        where = f"{at}contract[{i}]"
        kind = obj(where, kind, optional=False)
        matching(f"{where}.kind", kind.get("kind"), NAME, "the name of a kind of input", optional=False)
        figures = {}
        for key in ("errors", "limit", "cublas"):
            values = kind.get(key)
            if not isinstance(values, list) or not 1 <= len(values) <= 8:
                raise Corrupt(f"{where}.{key} is not a list of errors")
            for j, value in enumerate(values):
                not_negative(f"{where}.{key}[{j}]", value, _CONTRACT_MAX, optional=False)
            figures[key] = values
        errors, limit, cublas = figures["errors"], figures["limit"], figures["cublas"]
        if not len(errors) == len(limit) == len(cublas):
            raise Corrupt(f"{where}: errors, limit and cublas differ in length")
        if any(e > lim * (1 + 1e-9) for e, lim in zip(errors, limit, strict=True)) or any(
            lim < c * (1 - 1e-9) for lim, c in zip(limit, cublas, strict=True)
        ):
            raise Corrupt(f"{where}: an error past its limit, or a limit below cuBLAS's error")


ROUTES = ("ozaki_int8",)  # dispatch/routes.py's: methods a record may hold beside its families
GUARANTEES = ("element",)  # what a route held when it was timed: every element within the tier's bound
_MAX_MODULI = 20
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ROUTE_FIELDS = {
    "moduli",
    "advantage",
    "time_ms",
    "time_iqr_ms",
    "versus",
    "versus_ms",
    "cublas_ms",
    "contract",
    "date",
    "guarantee",
}


def check_routes(routes: Any, precision: str) -> None:
    """Check a record's "routes": each a method measured beside the families (`high` only).

    An entry: the moduli run, the check's advantage (>= 1), its time and the family's (versus,
    versus_ms) timed in the same process, cuBLAS's, the contract on each input kind, the date, and
    the guarantee it was timed with (GUARANTEES; absent in entries timed before it).
    """
    if routes is None:
        return
    if not isinstance(routes, dict) or len(routes) > len(ROUTES):
        raise Corrupt("'routes' is not an object of at most one entry a route")
    if routes and precision != "high":
        raise Corrupt(f"'routes' in a {precision} record: only `high` has any")
    for name, entry in routes.items():
        if name not in ROUTES:
            raise Corrupt(f"route {shown(name)} is not one of {', '.join(ROUTES)}")
        at = f"route {name}: "
        entry = obj(at.rstrip(": "), entry, optional=False)
        integer(f"{at}moduli", entry.get("moduli"), 1, _MAX_MODULI, optional=False)
        advantage = entry.get("advantage")
        if not number(advantage) or not 1 <= advantage <= 1e6:
            raise Corrupt(f"{at}advantage is {shown(advantage)}, not a number from 1 to 1e6")
        for key in ("time_ms", "versus_ms", "cublas_ms"):
            positive(f"{at}{key}", entry.get(key), TIME_MAX_MS)
        not_negative(f"{at}time_iqr_ms", entry.get("time_iqr_ms"), TIME_MAX_MS)
        matching(f"{at}versus", entry.get("versus"), NAME, "a family's name", optional=False)
        matching(f"{at}date", entry.get("date"), _DATE, "a date (YYYY-MM-DD)", optional=False)
        if "guarantee" in entry and entry["guarantee"] not in GUARANTEES:
            raise Corrupt(f"{at}guarantee is {shown(entry['guarantee'])}, not one of {', '.join(GUARANTEES)}")
        if not entry.get("contract"):
            raise Corrupt(f"{at}no contract: a route is recorded only where it met the tier's")
        _check_contract(at, entry["contract"])
        if extra := sorted(set(entry) - _ROUTE_FIELDS):
            raise Corrupt(f"{at}unknown field {shown(extra[0])}")
