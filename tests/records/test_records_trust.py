"""A results folder is input from outside (committed, shared, passed with --results, --priors
and $AUTOTUNE_RESULTS): what a record says must not reach generated code unescaped, a record that
contradicts itself is refused, reading one never hangs or exhausts memory, and every reader
(list, export, check, autotune.matmul) answers a bad record with one line naming the file."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import hostile_cases
import pytest
from helpers import ROOT, fake_kernels, have_nvcc, restamp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune import cli
from autotune.core.types import Problem, UserError
from autotune.dispatch import api
from autotune.dispatch import table as dispatch_table
from autotune.kernels.space import Space
from autotune.records.export import c_text, export, header_for_entry
from autotune.records.results import MAX_RECORD_BYTES, load_record, record_path
from autotune.records.validate import fastest

SLUG = hostile_cases.SLUG
P = Problem(64, 64, 64)
_E = ("families", "tiled")
_set = hostile_cases._set


def _record(folder: Path, change=None) -> Path:
    """The valid tiled record of hostile_cases at 64^3 under folder/results, `change`d."""
    hostile_cases.record(folder, change)
    return record_path(folder / "results", SLUG, P)


def _refused(path: Path, fragment: str = "") -> str:
    """load_record(path)'s one-line UserError, which names the file (and holds `fragment`)."""
    with pytest.raises(UserError) as exc:
        load_record(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: ") and "\n" not in text and fragment in text, text
    return text


def _cli(args: list[str], cwd: Path, timeout: float = 60, memory_gib: int | None = None):
    """`autotune ARGS` in `cwd`, as a process (a reader that hangs or grows is stopped)."""

    def limit():
        if memory_gib:
            resource.setrlimit(resource.RLIMIT_AS, (memory_gib * 2**30, memory_gib * 2**30))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "autotune", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=limit)


def _one_line(r, fragment: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: ") and fragment in lines[0], r.stderr[-2000:]
    return lines[0]


# ---- 1. nothing from a record reaches generated code unvalidated or unescaped -----------------

HOSTILE_TEXT = [
    "H100\n#error injected by the record\n//",
    "H100\r#error injected by the record",
    "H100 */ #error injected by the record /*",
    "H100\\",  # a backslash ending a // comment line splices the next line into it
    "H100 ??/",  # the same through a trigraph
    'H100 " #error injected by the record "',
    "H100\u2028#error injected by the record",
    "H100\x00#error",
    "H100\u202e#error",  # a bidi override: text that reads other than it compiles
]


@pytest.mark.parametrize("text", [t for t in HOSTILE_TEXT if not t.isprintable()])
@pytest.mark.parametrize(
    "keys",
    [
        ("gpu", "name"),
        (*_E, "limits", "name"),
        (*_E, "command"),
        (*_E, "date"),
        (*_E, "versions", "nvrtc"),
        (*_E, "search", "study"),
        (*_E, "message"),
    ],
)
def test_a_control_character_anywhere_in_a_record_is_refused(tmp_path, keys, text):
    _refused(_record(tmp_path, _set(keys, text)), "not printable text")


def test_a_control_character_in_a_key_or_a_name_is_refused(tmp_path):
    def key(data):
        data["families"]["tiled"]["search"]["x\n#error"] = 1

    _refused(_record(tmp_path / "key", key), "not printable text")

    def family(data):
        data["families"] = {"tiled\n#error": data["families"]["tiled"]}

    _refused(_record(tmp_path / "family", family), "is not a family name")

    def param(data):
        data["families"]["tiled"]["config"]["params"] = {"TILE\n#error": 32}

    _refused(_record(tmp_path / "param", param), "is not a parameter name")

    def choice(data):
        data["families"]["tiled"]["config"]["params"]["TILE"] = "x; system(0)"

    _refused(_record(tmp_path / "choice", choice), "must be an integer")


@pytest.mark.parametrize(
    "keys, value, fragment",
    [
        (("gpu", "name"), "N" * 257, "more than 256"),
        (("gpu", "slug"), "../../etc", "is not a folder name"),
        (("gpu", "arch"), "sm_90 -Xcompiler -fplugin=x", "not sm_<digits>"),
        ((*_E, "limits", "arch"), "sm_90\n", "not sm_<digits>"),
        ((*_E, "config", "name"), "tiled_TILE32\n#error", "is not its parameters'"),
        ((*_E, "config", "params", "TILE"), 2**40, "beyond a C int"),
        ((*_E, "source"), "$(rm -rf)", "not a hash"),
        ((*_E, "code"), "../../x", "not a hash of the machine code"),
        ((*_E, "command"), "x" * 20000, "more than 16384"),
    ],
)
def test_names_and_text_a_header_or_a_path_could_show_are_checked(tmp_path, keys, value, fragment):
    _refused(_record(tmp_path, _set(keys, value)), fragment)


def test_a_record_without_an_arch_exports_for_sm_90(tmp_path):
    """gpu.arch may be null (the reader allows it): the header's nvcc flags take sm_90 then."""

    def no_arch(data):
        data["gpu"]["arch"] = None

    path = _record(tmp_path, no_arch)
    load_record(path)
    out = tmp_path / "t.h"
    export(tmp_path / "results", SLUG, P, out)
    assert "-arch=sm_90" in out.read_text()


def test_a_config_name_missing_is_refused_and_export_writes_nothing(tmp_path):
    """A record without config.name: `list` once ended in a KeyError, and `export` wrote the header
    and then crashed."""

    def drop(data):
        del data["families"]["tiled"]["config"]["name"]

    path = _record(tmp_path, drop)
    _refused(path, "config name None")
    assert cli.main(["list", "--results", str(tmp_path / "results")]) == 2
    out = tmp_path / "t.h"
    assert cli.main(["export", "--size", "64", "--results", str(tmp_path / "results"), "-o", str(out)]) == 2
    assert not out.exists() and not list(tmp_path.glob(".t.h*"))


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_hostile_text_stays_inert_in_an_exported_header(tmp_path, text):
    """A header made from a record that never went through the reader (so only the escaping
    stands between its GPU name and the compiler): the text stays inside its comment, and the
    header compiles (with nvcc, where there is one)."""
    record = load_record(_record(tmp_path))
    record["gpu"]["name"] = text
    entry = record["families"]["tiled"]
    header = header_for_entry(record, entry, "tuned.h")
    assert set(header) <= set(map(chr, range(32, 127))) | {"\n"}
    for line in header.splitlines():
        if "injected" in line or "#error" in line:
            assert line.startswith("//") and "*/" not in line and "\\" not in line and "??" not in line, line
    if have_nvcc():
        (tmp_path / "tuned.h").write_text(header)
        (tmp_path / "main.cu").write_text('#include "tuned.h"\nint main() { return 0; }\n')
        b = subprocess.run(
            ["nvcc", "-arch=sm_90", "-c", "-o", str(tmp_path / "main.o"), str(tmp_path / "main.cu")],
            capture_output=True,
            text=True,
        )
        assert b.returncode == 0, b.stderr[-3000:]


@pytest.mark.parametrize("name", ["a\nb.h", "a\r\nb.h", "a*/b.h", 'a"b.h', "a\\", "a??/"])
def test_a_hostile_header_file_name_stays_inert(tmp_path, name):
    """The header's file name (-o) is shown in its comments: a name that could end one is escaped,
    so the header has the lines of a plain name's, and only comment lines differ."""
    record = load_record(_record(tmp_path))
    plain = header_for_entry(record, record["families"]["tiled"], "tuned.h").splitlines()
    header = header_for_entry(record, record["families"]["tiled"], name)
    assert set(header) <= set(map(chr, range(32, 127))) | {"\n"}
    lines = header.splitlines()
    assert len(lines) == len(plain)
    for line, was in zip(lines, plain, strict=True):
        assert line == was or (line.startswith("//") and was.startswith("//")), line
        assert not line.endswith("\\") and "??/" not in line and "*/" not in line


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_c_text_is_inert_in_any_comment_or_string_literal(text):
    out = c_text(text)
    assert set(out) <= set(map(chr, range(33, 127))) | {" "}
    for bad in ("*/", "/*", "\\", '"', "??"):
        assert bad not in out
    assert len(out) <= 256


def test_c_text_keeps_plain_names_as_they_are():
    for text in ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB", "tuned_sgemm.h", "4096x4096x4096_beta-0.5"):
        assert c_text(text) == text
    assert c_text("a\n#b") == "a%0A#b" and c_text("x */") == "x %2A/" and c_text("é") == "%C3%A9"


# ---- 2. a record that contradicts itself is refused -----------------------------------------


def _scale(keys: tuple, factor: float):
    def change(data):
        d = data
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] *= factor

    return change


@pytest.mark.parametrize(
    "change, fragment",
    [
        (_scale((*_E, "gflops"), 2.0), "GFLOP/s is not its time"),
        (_scale((*_E, "gflops"), 1.01), "GFLOP/s is not its time"),
        (_scale((*_E, "time_ms"), 0.5), "GFLOP/s is not its time"),
        (_scale((*_E, "ratio"), 3.0), "is not its GFLOP/s over cuBLAS's"),
        (_scale((*_E, "cublas", "gflops"), 3.0), "is not its GFLOP/s over cuBLAS's"),
        (_set((*_E, "problem", "M"), 128), "was measured at 128x64x64, not 64x64x64"),
        (_set((*_E, "problem"), "64x64x64"), "problem is '64x64x64', not an object"),
        (_set((*_E, "status"), "incorrect"), "only verified results"),
        (_set((*_E, "time_ms"), float("inf")), "time_ms is inf"),
        (_set((*_E, "time_ms"), -0.1), "time_ms is -0.1"),
        (_set((*_E, "time_iqr_ms"), -1.0), "time_iqr_ms is -1.0"),
        (_set((*_E, "cublas", "time_ms"), float("nan")), "cublas.time_ms is nan"),
        (_set((*_E, "error"), float("nan")), "error is nan"),
        (_set((*_E, "error"), float("inf")), "error is inf"),
        (_set((*_E, "error"), -1e-7), "error is -1e-07"),
        (_set((*_E, "error"), None), "error is None"),
        (_set((*_E, "registers"), 300), "300 registers a thread, past the device's 255"),
        (_set((*_E, "repeats"), -1), "repeats is -1"),
        (_set((*_E, "search", "seconds"), float("nan")), "search.seconds is nan"),
    ],
)
def test_a_record_that_contradicts_itself_is_refused(tmp_path, change, fragment):
    _refused(_record(tmp_path, change), fragment)


@pytest.mark.parametrize(
    "key, value",
    [("sm_count", 0), ("sm_count", -132), ("sm_count", 10**9), ("sm_count", 132.0), ("sm_count", True),
     ("regs_per_sm", 0), ("regs_per_block", -1), ("max_threads_per_block", 0), ("smem_per_sm", 0),
     ("smem_per_block", -49152), ("warp_size", 0), ("l2_bytes", -1), ("max_regs_per_thread", 0),
     ("smem_per_block_optin", "lots")],
)  # fmt: skip
def test_impossible_device_limits_are_refused(tmp_path, key, value):
    _refused(_record(tmp_path, _set((*_E, "limits", key), value)), f"limits.{key} is")


def _two_families(data, tiled_gflops: float, vec_gflops: float, best: str, first: str = "vectorized") -> None:
    """The record holding a vectorized entry beside tiled (`first` of the two in the file)."""
    tiled = data["families"]["tiled"]
    vec = copy.deepcopy(tiled)
    vec["config"] = {"family": "vectorized", "params": Space.load("vectorized").fallback.as_dict()}
    tiled["gflops"], vec["gflops"] = tiled_gflops, vec_gflops
    order = ["vectorized", "tiled"] if first == "vectorized" else ["tiled", "vectorized"]
    data["families"] = {f: {"tiled": tiled, "vectorized": vec}[f] for f in order}
    restamp(data, keep="gflops")
    data["best"] = best


def test_best_must_name_the_fastest_entry(tmp_path):
    path = _record(tmp_path, lambda d: _two_families(d, 5.0, 9.0, best="tiled"))
    _refused(path, "'best' is tiled at 5 GFLOP/s, but vectorized holds 9")


@pytest.mark.parametrize("first", ["vectorized", "tiled"])
@pytest.mark.parametrize("best", ["vectorized", "tiled"])
def test_list_export_and_matmul_name_the_same_best(tmp_path, monkeypatch, capsys, first, best):
    """Two entries equally fast, the record's `best` either, in either order in the file: `list`
    once printed `best`, while `export` and autotune.matmul took the first of the file."""
    _record(tmp_path, lambda d: _two_families(d, 7.0, 7.0, best=best, first=first))
    root = tmp_path / "results"
    assert cli.main(["list", "--results", str(root)]) == 0
    listed = re.search(r"64x64x64\s+best (\S+)", capsys.readouterr().out).group(1)
    _, exported = export(root, SLUG, P, tmp_path / "t.h")
    fake_kernels(monkeypatch, SLUG)
    _, chosen, _ = api._choose(0, Problem(64, 64, 64), None, root)
    assert listed == exported["config"]["name"] == chosen and chosen.startswith(best + "_")


def test_matmul_refuses_impossible_limits_with_one_line_naming_the_file(tmp_path, monkeypatch):
    """sm_count 0 once ended autotune.matmul in a ZeroDivisionError inside the model."""
    path = _record(tmp_path, _set((*_E, "limits", "sm_count"), 0))
    fake_kernels(monkeypatch, SLUG)
    with pytest.raises(UserError) as exc:
        api._choose(0, Problem(100, 100, 100), None, tmp_path / "results")
    assert str(exc.value).startswith(f"{path}: ") and "limits.sm_count is 0" in str(exc.value)


@pytest.mark.parametrize(
    "value, fragment",
    [
        (65, "TILE=65 is outside its domain [1, 64]"),
        ("wide", "TILE must be an integer, got 'wide'"),
    ],
)
def test_matmul_and_export_refuse_a_config_its_family_refuses_naming_the_file(tmp_path, monkeypatch, value, fragment):
    def change(data):
        data["families"]["tiled"]["config"]["params"]["TILE"] = value
        restamp(data)

    path = _record(tmp_path, change)
    load_record(path)  # a name or an integer: the family says whether it takes it
    fake_kernels(monkeypatch, SLUG)
    for call in (
        lambda: api._choose(0, Problem(64, 64, 64), None, tmp_path / "results"),
        lambda: export(tmp_path / "results", SLUG, P, tmp_path / "t.h"),
    ):
        with pytest.raises(UserError) as exc:
            call()
        assert str(exc.value).startswith(f"{path}: stored config ") and fragment in str(exc.value)
    assert not (tmp_path / "t.h").exists()


def test_a_record_of_a_family_not_shipped_is_read_and_left_out_by_matmul(tmp_path, monkeypatch):
    """A record may come from a newer autotune or from $AUTOTUNE_TEMPLATES: it is read, and
    matmul takes the families it can build (here the fallback, with no other)."""

    def other(data):
        entry = data["families"].pop("tiled")
        entry["config"] = {"family": "future_family", "params": {"TILE": 32}}
        data["families"] = {"future_family": entry}
        restamp(data)

    path = _record(tmp_path, other)
    assert load_record(path)["best"] == "future_family"
    fake_kernels(monkeypatch, SLUG)
    assert api._choose(0, Problem(64, 64, 64), None, tmp_path / "results")[2] == "fallback config"
    with pytest.raises(UserError, match=re.escape(f"{path}: unknown family 'future_family'")):
        export(tmp_path / "results", SLUG, P, tmp_path / "t.h")


def test_a_record_that_would_be_refused_is_never_written(tmp_path, h100):
    """update_record checks the merged record as a reader will: the tool never writes a record
    that list, export or matmul would then refuse."""
    from helpers import GPU
    from helpers import record_entry as _entry

    from autotune.records.store import update_record

    entry = _entry("tiled", {"TILE": 32}, 8000.0, h100, P)
    entry["ratio"] *= 2
    with pytest.raises(UserError, match=r"64x64x64.json: not written.*ratio"):
        update_record(tmp_path, GPU, P, {"tiled": entry})
    assert not list(tmp_path.rglob("*.json"))


def test_text_around_a_measurement_is_stored_printable(tmp_path, h100):
    """A command line or a storage URL may hold a newline: the search's record is written, with
    that text escaped, rather than refused after the search."""
    from autotune.core.types import Config, Measurement, Status
    from autotune.records.store import make_entry, update_record

    m = Measurement(Config.make("tiled", {"TILE": 32}), P, Status.OK, time_ms=0.1, gflops=P.flops / 1e5, error=1e-7)
    command = "autotune search --size 64 --storage 'sqlite:///a\nb.db'"
    entry = make_entry(m, {"gflops": 10.0}, search={"storage": "a\nb"}, versions={}, command=command, limits={})
    path, _ = update_record(tmp_path, {"name": "NVIDIA H100 80GB HBM3", "slug": SLUG}, P, {"tiled": entry})
    stored = load_record(path)["families"]["tiled"]
    assert stored["command"] == command.replace("\n", "\\n") and stored["search"]["storage"] == "a\\nb"


# ---- every field of the schema: its type, its range, its format, agreeing with the others ------


def _then_restamp(change, keep: str = "time_ms"):
    """`change`, then the figures derived from the one changed made to agree (helpers.restamp):
    what refuses the record is the bound, not a disagreement."""

    def both(data):
        change(data)
        restamp(data, keep=keep)

    return both


def _another_gpu(data):
    """A100's record, as a search on an A100 writes it, put in the H100's folder."""
    data["gpu"] = {"name": "NVIDIA A100-SXM4-80GB", "slug": "nvidia-a100-sxm4-80gb", "arch": "sm_80"}
    data["families"]["tiled"]["limits"].update(name="NVIDIA A100-SXM4-80GB", arch="sm_80")


def _cublas_paths(path: str, times: dict):
    def change(data):
        data["families"]["tiled"]["cublas"].update(path=path, paths=times)

    return change


_CONTRACT = {"kind": "uniform", "errors": [3e-7, 4e-9], "limit": [2e-6, 2e-8], "cublas": [1.5e-6, 1e-8]}


@pytest.mark.parametrize(
    "change, fragment",
    [
        (_set(("schema",), True), "results schema True, this autotune reads 1"),
        (_set(("schema",), 1.0), "results schema 1.0"),
        (_then_restamp(_set((*_E, "gflops"), 1e300), keep="gflops"), "gflops is 1e+300, more than 1e+12"),
        (_then_restamp(_set((*_E, "time_ms"), 1e10)), "time_ms is 1e+10, more than 1e+09"),
        (_then_restamp(_set((*_E, "cublas", "gflops"), 1e300)), "cublas.gflops is 1e+300, more than 1e+12"),
        (_set((*_E, "error"), 2.0), "error is 2, more than 1"),
        (_set((*_E, "cublas", "error"), 10**6), "cublas.error is 1e+06, more than 1"),
        (_another_gpu, "it holds results of GPU nvidia-a100-sxm4-80gb, not of its folder's ('nvidia-h100-80gb-hbm3')"),
        (_set(("gpu", "slug"), "nvidia-a100"), "gpu slug nvidia-a100 is not its name's (nvidia-h100-80gb-hbm3)"),
        (_set((*_E, "limits", "name"), "NVIDIA A100"), "limits.name is 'NVIDIA A100', not the record's gpu name"),
        (_set((*_E, "limits", "arch"), "sm_80"), "limits.arch is 'sm_80', not the record's gpu arch"),
        (_set((*_E, "limits", "smem_per_block"), 300000), "limits.smem_per_block 300000 is more than limits.smem"),
        (_set((*_E, "smem_bytes"), 300000), "300000 bytes of shared memory a block, past the device's 232448"),
        (_set((*_E, "time_min_ms"), 0.2), "time_ms 0.1 is not between time_min_ms 0.2 and time_max_ms 0.1"),
        (_set((*_E, "time_iqr_ms"), 0.5), "time_iqr_ms 0.5 is more than time_max_ms - time_min_ms (0)"),
        (_set((*_E, "cublas", "time_ms"), 1.0), "cuBLAS's 5000 GFLOP/s is not its time: 1 ms at 64x64x64"),
        (_cublas_paths("gemm", {"gemm": 1.0}), "cublas.time_ms is not the time cublas.paths gives its path gemm"),
        (_cublas_paths("../x", {}), "cublas.path is '../x', not the name of a cuBLAS entry point"),
        (_cublas_paths("gemm", {"gemm": "fast"}), "cublas.paths.gemm is 'fast', not a positive number"),
        (_set((*_E, "search"), []), "'search' is not an object"),
        (_set((*_E, "search", "study"), f"{SLUG}/128x128x128/tiled/4af3"), f"not a study of {SLUG}/64x64x64/tiled"),
        (_set((*_E, "search", "study"), f"{SLUG}/64x64x64/vectorized/4af308f346"), "not a study of"),
        (_set((*_E, "search", "seed"), True), "search.seed is True, not an integer from 0 to 4294967295"),
        (_set((*_E, "search", "trials"), 0), "search.trials is 0, not an integer from 1"),
        (_set((*_E, "search", "evaluated"), -3), "search.evaluated is -3"),
        (_set((*_E, "search", "valid_points"), 2.5), "search.valid_points is 2.5"),
        (_set((*_E, "search", "sampler"), "TPE!"), "search.sampler is 'TPE!', not a sampler's name"),
        (_set((*_E, "search", "seconds"), 1e12), "search.seconds is 1e+12, more than 1e+09"),
        (_set((*_E, "search", "storage"), 5), "search.storage is 5, not text"),
        (_set((*_E, "versions"), [1]), "'versions' is not an object"),
        (_set((*_E, "versions", "cupy"), [14]), "versions.cupy is [14], not a version"),
        (_set((*_E, "versions", "cupy"), "1" * 100), "versions.cupy is '111"),
        (_set((*_E, "date"), "yesterday"), "date is 'yesterday', not an ISO 8601 date and time with its time zone"),
        (_set((*_E, "date"), "2026-11-22T08:57:51"), "not an ISO 8601 date and time with its time zone"),
        (_set((*_E, "date"), 20261122), "date is 20261122, not an ISO 8601 date"),
        (_set((*_E, "message"), 5), "message is 5, not text"),
        (_set((*_E, "command"), ["autotune"]), "command is ['autotune'], not text"),
        (_set((*_E, "contract"), "x"), "contract is not a list"),
        (_set((*_E, "contract"), [{**_CONTRACT, "errors": [1e-5, 4e-9]}]), "an error past its limit"),
        (_set((*_E, "contract"), [{**_CONTRACT, "limit": [1e-6, 2e-8]}]), "a limit below cuBLAS's error"),
        (_set((*_E, "contract"), [{**_CONTRACT, "kind": "Uniform!"}]), "contract[0].kind is 'Uniform!', not the name"),
        (_set((*_E, "contract"), [{**_CONTRACT, "cublas": [1e300, 0]}]), "contract[0].cublas[0] is 1e+300"),
        (_set(("problem", "beta"), 1e39), "problem: beta 1e+39 is not a number FP32 holds"),
        (_set(("problem",), {"M": 2**20, "N": 2**20, "K": 2**20}), "bytes, more than any GPU holds"),
        (_set(("best",), 5), "'best' is 5, not a family's name"),
        (_set((*_E, "registers"), True), "registers is True"),
        (_set((*_E, "repeats"), 1.5), "repeats is 1.5"),
        (_set((*_E, "spill_bytes"), -1), "spill_bytes is -1"),
        (_set((*_E, "config", "family"), "x" * 5000), "config family 'xxx"),
    ],
)
def test_every_field_is_checked_for_its_type_range_and_format(tmp_path, change, fragment):
    text = _refused(_record(tmp_path, change), fragment)
    assert len(text) < len(str(tmp_path)) + 400, text  # a value is quoted short, never whole


def test_a_record_of_another_gpu_in_this_gpus_folder_is_one_line_for_every_reader(tmp_path):
    _record(tmp_path, _another_gpu)
    for args in (["list"], ["export", "--size", "64"], ["check", "--static"]):
        _one_line(_cli(args, tmp_path), "it holds results of GPU nvidia-a100-sxm4-80gb, not of its folder's")


# ---- 3. reading a record never hangs, never exhausts memory, never traces back ---------------


def test_a_record_that_is_a_pipe_is_refused_without_waiting(tmp_path):
    _record(tmp_path)
    os.mkfifo(tmp_path / "results" / SLUG / "128x128x128.json")
    _one_line(_cli(["list"], tmp_path, timeout=60), "128x128x128.json: not read as a results file: not a regular file")


def test_a_record_linked_to_a_device_is_refused_before_reading(tmp_path):
    """A link to /dev/zero once made `autotune list` grow until killed (24 GB); here the process
    may have 1 GiB of address space."""
    _record(tmp_path)
    (tmp_path / "results" / SLUG / "128x128x128.json").symlink_to("/dev/zero")
    r = _cli(["list"], tmp_path, timeout=120, memory_gib=1)
    _one_line(r, "128x128x128.json: not read as a results file: not a regular file (a symbolic link)")


def test_a_link_to_a_record_is_refused_unread_and_other_odd_files_are_one_line(tmp_path):
    """A record that is a symbolic link is not followed: what it points to (another GPU's record,
    or any JSON file the reader may read) is not read as this folder's, nor quoted."""
    path = _record(tmp_path)
    folder = path.parent
    elsewhere = tmp_path / "kept.json"
    data = json.loads(path.read_text())
    data["gpu"]["name"] = "SECRET-" + "s" * 100
    elsewhere.write_text(json.dumps(data))
    path.unlink()
    path.symlink_to(elsewhere)
    assert "SECRET" not in _refused(path, "not a regular file (a symbolic link)")
    assert "SECRET" not in _one_line(_cli(["list"], tmp_path), "(a symbolic link)")
    loop = folder / "128x128x128.json"
    loop.symlink_to(loop)
    _refused(loop, "not a regular file (a symbolic link)")
    loop.unlink()
    (folder / "256x256x256.json").mkdir()
    _refused(folder / "256x256x256.json", "not a regular file (a folder)")


def test_a_huge_record_is_refused_unread(tmp_path):
    path = _record(tmp_path)
    with open(path, "r+b") as f:
        f.truncate(MAX_RECORD_BYTES + 1)  # sparse: nothing written, nothing read
    _refused(path, f"a record is at most {MAX_RECORD_BYTES}")
    with open(path, "r+b") as f:
        f.truncate(8 * 2**30)
    _refused(path, f"a record is at most {MAX_RECORD_BYTES}")


@pytest.mark.parametrize("depth", [20, 1000, 100_000])
def test_a_record_nested_deep_is_one_line(tmp_path, depth):
    path = _record(tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data)[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}")
    _refused(path, "nest")
    _one_line(_cli(["list"], tmp_path), "nest")


def test_a_record_not_in_utf8_is_one_line(tmp_path):
    path = _record(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"NVIDIA", b"NVIDIA\xff"))
    _refused(path, "not UTF-8")


@pytest.mark.parametrize("args", [["list"], ["export", "--size", "64"], ["check", "--static"], ["report"]])
def test_every_command_refuses_a_bad_record_with_one_line_naming_it(tmp_path, args):
    _record(tmp_path, _set((*_E, "limits", "sm_count"), 0))
    _one_line(_cli(args, tmp_path, timeout=300), f"{SLUG}/64x64x64.json: corrupted results file")
    assert not (tmp_path / "tuned_sgemm.h").exists()


def test_matmul_refuses_a_damaged_record_with_one_line_naming_it(tmp_path, monkeypatch):
    path = _record(tmp_path)
    path.write_text("{broken")
    fake_kernels(monkeypatch, SLUG)
    with pytest.raises(UserError) as exc:
        api._choose(0, Problem(100, 100, 100), None, tmp_path / "results")
    assert str(exc.value).startswith(f"{path}: corrupted results file (not JSON")


# ---- every reader: accepted and usable, or one UserError naming the file -------------------

_BASE: dict = {}


def _base() -> dict:
    """A valid record of two families (tiled, vectorized) at 64^3, made once."""
    if not _BASE:
        with tempfile.TemporaryDirectory() as folder:
            path = _record(Path(folder), lambda d: _two_families(d, 5.0, 9.0, best="vectorized"))
            _BASE.update(json.loads(path.read_text()))
    return copy.deepcopy(_BASE)


_TEXT = st.text(max_size=30) | st.sampled_from(["", "tiled", "TILE", "sm_90", "64x64x64", "ok", "nn", "*/", "\n"])
_NUMBER = (
    st.integers(-(2**70), 2**70)
    | st.sampled_from([0, -1, 1, 2**31, 2**63, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
)
_LEAF = st.none() | st.booleans() | _NUMBER | _TEXT
_VALUE = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3))


def _containers(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _containers(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _containers(v, (*path, i))


@st.composite
def _mutated(draw) -> dict:
    data = _base()
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _containers(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for k in path[:-1]:
            parent = parent[k]
        key, old = path[-1], parent[path[-1]]
        op = draw(st.sampled_from(["replace", "delete", "nest", "scale", "rename"]))
        if op == "replace":
            parent[key] = draw(_VALUE)
        elif op == "delete":
            del parent[key]
        elif op == "nest":
            parent[key] = draw(st.sampled_from([[old], {"x": old}, [[[[old]]]]]))
        elif op == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
            factor = draw(st.sampled_from([-1, 0, 2, 1e300, 1e-300, 1.0005]))
            try:
                parent[key] = old * factor
            except OverflowError:  # an int past a float's range (drawn by `replace`) times a float
                parent[key] = math.inf if old > 0 else -math.inf
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(_TEXT)] = parent.pop(key)
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_a_mutated_record_is_usable_by_every_reader_or_one_line_naming_it(data):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "results"
        path = record_path(root, SLUG, P)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
        try:
            record = load_record(path)
        except UserError as exc:
            text = str(exc)
            assert text.startswith(f"{path}: ") and "\n" not in text and "\r" not in text
            return
        # Accepted: what every reader does with it works, or is one line naming the file.
        best = fastest(record["families"])
        assert best == record["best"]
        for call in (
            lambda: dispatch_table._read_table(str(root), SLUG).choose(Problem(100, 90, 80), None),
            lambda: dispatch_table._read_table(str(root), SLUG).choose(P, None),
            lambda: export(root, SLUG, P, Path(folder) / "t.h"),
        ):
            try:
                call()
            except UserError as exc:
                assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc), str(exc)
        header = Path(folder) / "t.h"
        if header.exists():
            assert set(header.read_text()) <= set(map(chr, range(32, 127))) | {"\n"}
        for entry in record["families"].values():
            for key in ("gflops", "time_ms", "ratio", "error"):
                assert math.isfinite(entry[key]) and entry[key] >= 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | _VALUE.map(json.dumps).map(str.encode))
def test_any_bytes_are_a_record_or_one_line_naming_the_file(raw):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "64x64x64.json"
        path.write_bytes(raw)
        try:
            load_record(path)
        except UserError as exc:
            assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
