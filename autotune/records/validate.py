"""What a record must be to be trusted (`check_record`), and the rule for its best (`fastest`).

A trusted record has its structure, every field checked by type, range and format (fields.py),
printable bounded text and bounded nesting throughout, and agrees with itself (figures derived
from each other, the GPU's name and its folder). records/results.py reads every record through
here (`trusted`), a file of any form: schema 1, each entry whole; schema 2, the fields every entry
shares stored once; schema 3 (what store.record_text writes), schema 2 with each config's name left
to its parameters. All read to the same record.
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.types import FP32_RANGE, Config, Measurement, Problem, UserError, fp32_holds, one_line
from ..kernels.limits import gpu_slug
from . import fields
from .fields import ARCH, MAX_GPU_NAME, NAME, Corrupt, shown

SCHEMA = 1  # the record every reader gets, each entry whole
PACKED = 3  # a file's form since: the fields every entry shares under "shared", once; no config names
SHARED = 2  # the form before: "shared", with the config names written out
SHAPE_FILE = re.compile(r"^(\d+)x(\d+)x(\d+)(_(?:nt|tn|tt))?(_b\d+)?(_beta[-+.e0-9]+)?(_(?:high|medium))?\.json$")

_MAX_DEPTH = 16  # records nest 6 deep
_REL_TOL = 1e-3  # between a stored figure and the same figure computed from the others
_C_INT = fields.C_INT
_MAX_OPERAND_BYTES = 2**40  # a problem whose operands pass 1 TiB was measured on no GPU

_FAMILY = NAME  # family and choice names
_PARAM = re.compile(r"[A-Z][A-Z0-9_]{0,63}")  # parameter names
_CHOICE = NAME
SLUG_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # limits.gpu_slug's folder names


# An entry's fields in the order store.make_entry writes them: a shared field is put back in its place.
_ENTRY_ORDER = {
    key: i
    for i, key in enumerate(
        (
            *("config", "problem", "status", "message", "time_ms", "time_min_ms", "time_max_ms", "time_iqr_ms"),
            *("repeats", "gflops", "error", "registers", "spill_bytes", "smem_bytes", "source", "code", "contract"),
            *("sm_clock_mhz", "power_w", "throttle", "cublas", "ratio", "search", "versions", "limits", "date"),
            "command",
        )
    )
}


def trusted(data: Any, path: Path, fault: str = "corrupted results file") -> dict:
    """Return a file's parsed JSON as every reader gets the record, checked as check_record does.

    A schema 2 or 3 file's shared fields are put back into each entry (a copy in each), an entry
    without a problem gets the record's, and (schema 3) each config its name from its parameters:
    the record is then the one its schema 1 file holds.

    Raises:
        UserError: One, naming `path`, then `fault` and what is wrong.
    """
    with _refusing(path, fault):
        data = _unpacked(data)
    check_record(data, path, fault)
    return data


def _unpacked(data: Any) -> Any:
    """Return a schema 2 or 3 record as schema 1 holds it; any other value as it is."""
    if not isinstance(data, dict) or type(data.get("schema")) is not int or data["schema"] not in (SHARED, PACKED):
        return data
    shared = data.get("shared", {})
    if not isinstance(shared, dict):
        raise Corrupt("'shared' is not an object")
    families = data["families"]
    if not isinstance(families, dict):
        raise Corrupt("'families' is not an object")
    if shared and not families:
        raise Corrupt("'shared' holds fields but there are no families to share them")
    whole = {}
    for fam, own in families.items():
        if not isinstance(own, dict):
            raise Corrupt(f"entry {shown(fam)} is not an object")
        both = sorted(k for k in own if k in shared)
        if both:
            raise Corrupt(f"entry {fam}: {shown(both[0])} is both its own and shared")
        entry = copy.deepcopy({"problem": data["problem"], **shared}) | own
        if data["schema"] == PACKED:
            entry["config"] = _named(entry.get("config"))
        whole[fam] = {k: entry[k] for k in sorted(entry, key=lambda k: _ENTRY_ORDER.get(k, len(_ENTRY_ORDER)))}
    # The keys in the order a schema 1 file holds them: shared's is gone, families' in its place.
    return {k: SCHEMA if k == "schema" else whole if k == "families" else v for k, v in data.items() if k != "shared"}


def _named(cfg: Any) -> Any:
    """Return a schema 3 config with its name (its parameters'), or any other value as it is."""
    # A config whose parameters make no name is left without one: _check_config then says why.
    if not isinstance(cfg, dict) or "name" in cfg:
        return cfg
    try:
        return cfg | {"name": Config.make(cfg["family"], cfg["params"]).name}
    except (KeyError, TypeError, UserError):
        return cfg


def check_record(data: Any, path: Path, fault: str = "corrupted results file") -> None:
    """Check that `data` is a record this tool can trust.

    Raises:
        UserError: One, naming `path`, then `fault` and what is wrong.
    """
    with _refusing(path, fault):
        _check_record(data, path)


@contextlib.contextmanager
def _refusing(path: Path, fault: str) -> Iterator[None]:
    """Turn what is wrong with a record into one UserError naming `path`, then `fault`."""
    try:
        yield
    except (UserError, Corrupt) as exc:
        if str(path) in str(exc):
            raise UserError(one_line(str(exc))) from None
        raise UserError(one_line(f"{path}: {fault} ({exc})")) from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise UserError(one_line(f"{path}: {fault} ({type(exc).__name__}: {shown(str(exc))[1:-1]})")) from None


def _check_record(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise Corrupt("not a JSON object")
    schema = data["schema"]
    if type(schema) is not int or schema != SCHEMA:  # not `true`, which Python takes for 1
        raise UserError(f"{path}: results schema {shown(schema)}, this autotune reads {SCHEMA}")
    problem = _problem(data["problem"], "problem")
    named = SHAPE_FILE.match(path.name)
    if named and path.stem != problem.name:
        raise Corrupt(f"the file of {path.stem} holds {problem.name}")
    gpu = _check_gpu(data["gpu"], path.parent.name if named else None)
    families = data["families"]
    if not isinstance(families, dict):
        raise Corrupt("'families' is not an object")
    for fam, entry in families.items():
        if not isinstance(fam, str) or not _FAMILY.fullmatch(fam):
            raise Corrupt(f"family {shown(fam)} is not a family name (lower_case letters, digits and '_')")
        if not isinstance(entry, dict):
            raise Corrupt(f"entry {fam} is not an object")
        _check_entry(fam, entry, problem, gpu)
    _check_best(data.get("best"), families)
    fields.check_routes(data.get("routes"), problem.precision)
    _check_tree(data, "", 0)


def _check_entry(fam: str, entry: dict, problem: Problem, gpu: dict) -> None:
    """Check every field of one family's entry (fields.py), and that its figures agree."""
    _check_config(fam, entry)
    _problem(entry["problem"], f"entry {fam}: problem")
    entry_measurement(entry)
    if entry["config"]["family"] != fam:
        raise Corrupt(f"entry {fam} holds a {entry['config']['family']} config")
    fields.check_measured(fam, entry)
    _check_agrees(fam, entry, problem)
    fields.check_spread(fam, entry)
    fields.check_limits(fam, entry, gpu)
    fields.check_search(fam, entry, gpu["slug"], problem.name)
    fields.check_provenance(fam, entry)


def _check_best(best: Any, families: dict) -> None:
    if best is not None and not isinstance(best, str):
        raise Corrupt(f"'best' is {shown(best)}, not a family's name")
    if families and best not in families:
        raise Corrupt(f"'best' is {shown(best)}, not one of its families ({', '.join(families)})")
    if not families and best is not None:
        raise Corrupt(f"'best' is {shown(best)} but it holds no families")
    if families and families[best]["gflops"] != families[fastest(families)]["gflops"]:
        top = fastest(families)
        raise Corrupt(
            f"'best' is {best} at {families[best]['gflops']:.6g} GFLOP/s, but {top} holds {families[top]['gflops']:.6g}"
        )


def _problem(value: Any, where: str) -> Problem:
    """Return a record's problem: a Problem (its own checks).

    Its beta is a float the kernels take, its operands of a size some GPU holds.
    """
    if not isinstance(value, dict):
        raise Corrupt(f"{where} is {shown(value)}, not an object")
    problem = Problem(**value)
    if not fp32_holds(problem.beta):  # what no search measures: the kernels take beta as a C float
        raise Corrupt(f"{where}: beta {shown(problem.beta)} is not a number FP32 holds ({FP32_RANGE})")
    too_large = oversized(problem)
    if too_large:
        raise Corrupt(f"{where}: {too_large}")
    return problem


def oversized(problem: Problem) -> str | None:
    """Say why no GPU holds `problem`'s operands (so no record can hold it), or return None."""
    if problem.bytes > _MAX_OPERAND_BYTES:
        return f"{problem.name}'s operands take {problem.bytes:.3g} bytes, more than any GPU holds"
    return None


def _check_gpu(gpu: Any, folder: str | None) -> dict:
    """Check the record's GPU: a device's name, an arch, and its folder the one the record is in.

    Its folder name is limits.gpu_slug, checked against `folder` when the record is in a GPU's
    folder: another GPU's record there would be read as this one's.
    """
    if not isinstance(gpu, dict) or not all(isinstance(gpu.get(k), str) for k in ("name", "slug")):
        raise Corrupt("gpu name and slug must be strings")
    fields.text(gpu["name"], "gpu name", MAX_GPU_NAME)
    slug = gpu["slug"]
    if not SLUG_NAME.fullmatch(slug) or len(slug) > MAX_GPU_NAME:
        raise Corrupt(f"gpu slug {shown(slug)} is not a folder name (lower-case letters, digits and '-')")
    if gpu_slug(gpu["name"]) != slug:
        raise Corrupt(f"gpu slug {slug} is not its name's ({gpu_slug(gpu['name'])})")
    if folder is not None and folder != slug:
        raise Corrupt(f"it holds results of GPU {slug}, not of its folder's ({shown(folder)})")
    fields.matching("gpu arch", gpu.get("arch"), ARCH, "sm_<digits> with an optional 'a'")
    return gpu


def _check_config(fam: str, entry: dict) -> None:
    """Check the config: values a template can take, and its name the one they give.

    The values are integers within a C int, or a choice's name; the name is a C identifier in headers.
    """
    cfg = entry["config"]
    if not isinstance(cfg, dict):
        raise Corrupt(f"entry {fam}: 'config' is not an object")
    family, params = cfg["family"], cfg["params"]
    if not isinstance(family, str) or not _FAMILY.fullmatch(family):
        raise Corrupt(f"entry {fam}: config family {shown(family)} is not a family name")
    config = Config.make(family, params)  # refuses what is neither an integer nor a string
    for name, value in config.params:
        if not _PARAM.fullmatch(name):
            raise Corrupt(f"entry {fam}: parameter {shown(name)} is not a parameter name (UPPER_CASE)")
        if isinstance(value, int) and not -_C_INT - 1 <= value <= _C_INT:
            raise Corrupt(f"entry {fam}: parameter {name}={value} is beyond a C int")
        if isinstance(value, str) and not _CHOICE.fullmatch(value):
            raise Corrupt(
                f"entry {fam}: parameter {name} must be an integer, got {shown(value)} (or the name of a "
                "choice: lower_case letters, digits and '_')"
            )
    if cfg.get("name") != config.name:
        raise Corrupt(f"entry {fam}: config name {shown(cfg.get('name'))} is not its parameters' ({config.name})")


def _check_agrees(fam: str, entry: dict, problem: Problem) -> None:
    """Check that the entry's figures agree with each other and with the record's problem.

    GFLOP/s are the time at the shape (its own, and cuBLAS's), the ratio is the one over the other.
    """
    if _problem(entry["problem"], f"entry {fam}: problem") != problem:
        raise Corrupt(f"entry {fam} was measured at {Problem(**entry['problem']).name}, not {problem.name}")
    cublas = entry["cublas"]
    _agrees_with_time(fam, "", entry["gflops"], entry["time_ms"], problem)
    ratio = entry["gflops"] / cublas["gflops"]
    if not math.isclose(entry["ratio"], ratio, rel_tol=_REL_TOL):
        raise Corrupt(
            f"entry {fam}: ratio {entry['ratio']:.6g} is not its GFLOP/s over cuBLAS's "
            f"({entry['gflops']:.6g} / {cublas['gflops']:.6g} = {ratio:.6g})"
        )
    if cublas.get("time_ms"):
        _agrees_with_time(fam, "cuBLAS's ", cublas["gflops"], cublas["time_ms"], problem)


def _agrees_with_time(fam: str, whose: str, gflops: float, time_ms: float, problem: Problem) -> None:
    expect = problem.flops / (time_ms * 1e6)
    if not math.isclose(gflops, expect, rel_tol=_REL_TOL):
        raise Corrupt(
            f"entry {fam}: {whose}{gflops:.6g} GFLOP/s is not its time: {time_ms:.6g} ms at {problem.name} is "
            f"{expect:.6g}"
        )


def _check_tree(value: Any, where: str, depth: int) -> None:
    """Check every string (keys too) printable and bounded, every number finite, nesting bounded.

    What no field-by-field check reads is so still safe to print or pass on.
    """
    if depth > _MAX_DEPTH:
        raise Corrupt(f"{where or 'the record'} nests deeper than {_MAX_DEPTH}")
    if isinstance(value, str):
        fields.text(value, where or "the record")
    elif isinstance(value, float) and not math.isfinite(value):
        raise Corrupt(f"{where} is {shown(value)}, not a finite number")
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise Corrupt(f"{where} is {shown(value)}, beyond a 64-bit integer")
    elif isinstance(value, dict):
        for key, item in value.items():
            fields.text(key, f"a key of {where or 'the record'}")
            _check_tree(item, f"{where}.{key}" if where else key, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_tree(item, f"{where}[{i}]", depth + 1)


def fastest(families: Mapping[str, dict], usable: Callable[[str], bool] | None = None) -> str | None:
    """Return the family whose entry has the most GFLOP/s (among those `usable` accepts), or None.

    The first in the record's order wins among equals. Every reader picks a record's best with this
    (a loaded record lists its `best` first), so `list`, `export` and `autotune.matmul` name the same
    entry.
    """
    found = [f for f in families if usable is None or usable(f)]
    return max(found, key=lambda f: families[f]["gflops"], default=None)


def entry_measurement(entry: dict) -> Measurement:
    """Return a record's entry as a Measurement."""
    return Measurement.from_dict(entry)
