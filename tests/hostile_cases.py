"""Hostile inputs for tests/cli/test_hostile.py: each case's command, folder and checks; its answer
is read from the table of bad inputs on the results page, results/README.md (a row a case, in
order; README.md's Reliability links it), except where a loop makes it here (`given`).

    python tests/hostile_cases.py --markdown      # the table as the cases read it (a new case's row)

Each case runs `autotune ARGS` in a fresh folder that its `setup` fills. The answer is one
`autotune: error: ...` line on stderr holding every fragment (Case.fragments), with exit code 2, or
the documented success (`code` 0 or 1, fragments looked for on stdout). Nothing may be left
half-written: no temporary file anywhere in the folder, and `after` checks what must not exist.
`owner` marks a case another piece of work fixes (the test expects it to fail until that is
merged); `handled_by` names a dedicated test for a case that is not one command.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUG = "nvidia-h100-80gb-hbm3"  # the replay evaluator's GPU (the H100 profile)
PREFIX = "autotune: error: "
HEAD = "| input | answer |"  # the results page's table of bad inputs


@dataclass(frozen=True)
class Case:
    input: str  # what the user did, in words
    args: tuple[str, ...]  # autotune's arguments, run in the case's folder
    # What the table shows: the line (or the success), "…" where it varies. Written here only where a
    # loop makes it: the results page's table holds the others, the one place they are written.
    given: str = ""
    # Fragments of the error line (exit 2) or of stdout (otherwise); for an `answer` that is the
    # error line itself, "…" where it varies, its pieces between those (`fragments`).
    expect: tuple[str, ...] = ()
    code: int = 2
    setup: Callable[[Path], dict] | None = None  # fills the folder; returns environment additions
    readonly: tuple[str, ...] = ()  # folders made read-only after setup (run as 'nobody' under root)
    unreadable: tuple[str, ...] = ()  # files or folders no one may read (mode 000; run as 'nobody' too)
    after: Callable[[Path], None] | None = None  # asserts what must not have been written
    stdout: tuple[str, ...] = ()  # fragments of stdout too (a dry run's table before its error)
    silent: bool = False  # nothing on stdout: refused before any work began (nothing measured, then lost)
    # Where stdout goes instead of a pipe read to the end: "gone" a pipe whose reader has left
    # (`| head -1`), "full" /dev/full (a full disk), "closed" no descriptor at all (`>&-`).
    stdout_to: str = ""
    shown: str = ""  # the command as the table shows it, when not `autotune ARGS`
    note: str = ""  # said after the answer in the table (what is not written, when it is said)
    owner: str = ""  # fixed by other work: expected to fail here until it is merged
    handled_by: str = ""  # checked by this dedicated test instead
    timeout: int = 300
    slow: bool = False  # 15 s and more on two cores: under -m slow (CI's second step) only

    @property
    def answer(self) -> str:
        return self.given or _page_answer(self)

    @property
    def fragments(self) -> tuple[str, ...]:
        """What the output must hold: `expect`, else the pieces of an error line given whole."""
        if self.expect or self.code != 2 or not self.answer.startswith(PREFIX):
            return self.expect
        return tuple(piece for piece in self.answer.split("…") if piece.strip())

    @property
    def command(self) -> str:
        return self.shown or "autotune " + shlex.join(self.args)


# ---- setups ----------------------------------------------------------------------------------


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def replay_table(folder: Path) -> dict:
    """table.json: every valid tiled point at 1000-4000 GFLOP/s, for searches without a GPU."""
    from autotune.kernels.limits import load_profile
    from autotune.kernels.space import Space

    valid = Space.load("tiled").enumerate(load_profile("h100")).valid
    _write(folder / "table.json", json.dumps({"table": {c.name: 1000.0 * (i + 1) for i, c in enumerate(valid)}}))
    return {}


def record(folder: Path, change: Callable[[dict], None] | None = None) -> dict:
    """results/<h100>/64x64x64.json with a verified tiled entry, then `change`d by hand."""
    from autotune.core.types import Config, Measurement, Problem, Status
    from autotune.kernels.limits import load_profile
    from autotune.records.results import load_record, record_path
    from autotune.records.store import make_entry, update_record

    p = Problem(64, 64, 64)
    m = Measurement(
        Config.make("tiled", {"TILE": 32}),
        p,
        Status.OK,
        time_ms=0.1,
        time_min_ms=0.1,
        time_max_ms=0.1,
        time_iqr_ms=0.0,
        repeats=5,
        gflops=p.flops / 1e5,
        error=1e-7,
        registers=40,
        spill_bytes=0,
        smem_bytes=8448,
    )
    entry = make_entry(
        m,
        {"time_ms": p.flops / 5e9, "gflops": 5000.0, "error": 1e-7},
        search={},
        versions={},
        command="autotune search --size 64",
        limits=load_profile("h100").to_dict(),
    )
    gpu = {"name": "NVIDIA H100 80GB HBM3", "slug": SLUG, "arch": "sm_90"}
    update_record(folder / "results", gpu, p, {"tiled": entry})
    if change:
        path = record_path(folder / "results", SLUG, p)
        data = load_record(path)  # each entry whole (schema 1), a form a reader takes too
        change(data)
        path.write_text(json.dumps(data))
    return {}


def _set(keys: tuple, value) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        d = data
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return change


def _agreeing(keys: tuple, value) -> Callable[[dict], None]:
    """An entry's figure set to `value`, and its time and ratio made to agree with it."""

    def change(data: dict) -> None:
        _set(keys, value)(data)
        entry = data["families"][keys[1]]
        entry["time_ms"] = entry["time_min_ms"] = entry["time_max_ms"] = 64**3 * 2 / (entry["gflops"] * 1e6)
        entry["ratio"] = entry["gflops"] / entry["cublas"]["gflops"]

    return change


def _another_gpu(data: dict) -> None:
    """An A100's record, as a search there writes it, in the H100's folder."""
    data["gpu"] = {"name": "NVIDIA A100-SXM4-80GB", "slug": "nvidia-a100-sxm4-80gb", "arch": "sm_80"}
    for entry in data["families"].values():
        entry["limits"].update(name=data["gpu"]["name"], arch="sm_80")


def _records_and(*more: Callable[[Path], dict]) -> Callable[[Path], dict]:
    def setup(folder: Path) -> dict:
        env = record(folder)
        for s in more:
            env |= s(folder) or {}
        return env

    return setup


def _family(name: str, edit: Callable[[str], str], base: str = "tiled") -> Callable[[Path], dict]:
    """A template folder (AUTOTUNE_TEMPLATES) holding `name`: `base` edited, with its space."""

    def setup(folder: Path) -> dict:
        text = (ROOT / "templates" / f"{base}.cu.j2").read_text()
        _write(folder / "tpl" / f"{name}.cu.j2", edit(text))
        space = (ROOT / "configs" / f"{base}.yaml").read_text().replace(f"family: {base}", f"family: {name}")
        _write(folder / "tpl" / f"{name}.yaml", space)
        return {"AUTOTUNE_TEMPLATES": str(folder / "tpl")}

    return setup


def _no_nvrtc(folder: Path) -> dict:
    """A cupy_backends that cannot be imported first on the path: an install without the extra."""
    _write(folder / "fake" / "cupy_backends" / "__init__.py", "raise ImportError('no CUDA extra installed')\n")
    return {"PYTHONPATH": str(folder / "fake")}


def _files(**files: str | bytes) -> Callable[[Path], dict]:
    def setup(folder: Path) -> dict:
        for name, text in files.items():
            _write(folder / name.replace("__", "/"), text)
        return {}

    return setup


def _dirs(*names: str) -> Callable[[Path], dict]:
    def setup(folder: Path) -> dict:
        for n in names:
            (folder / n).mkdir(parents=True, exist_ok=True)
        return {}

    return setup


def _link(name: str, target: str) -> Callable[[Path], dict]:
    def setup(folder: Path) -> dict:
        (folder / name).symlink_to(target)
        return {}

    return setup


def _fifo(folder: Path) -> dict:
    os.mkfifo(folder / "fifo")
    return {}


def _refifo(path: Path) -> dict:
    path.unlink()
    os.mkfifo(path)
    return {}


def _victim(folder: Path) -> dict:
    """victim.db: another program's SQLite database (one table of its own), beside the results."""
    import sqlite3

    db = sqlite3.connect(folder / "victim.db")
    db.execute("CREATE TABLE mine (x)")
    db.commit()
    db.close()
    return {}


def _untouched_victim(folder: Path) -> None:
    import sqlite3

    db = sqlite3.connect(f"file:{folder / 'victim.db'}?mode=ro", uri=True)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    db.close()
    assert tables == ["mine"], f"victim.db was written: {tables}"


def _planted(name: str, target: str | None = None) -> Callable[[Path], dict]:
    """results/<gpu>/`name` planted: a symbolic link to `target`, or a pipe (no target)."""

    def setup(folder: Path) -> dict:
        (folder / "results" / SLUG).mkdir(parents=True, exist_ok=True)
        path = folder / "results" / SLUG / name
        if path.exists():
            path.unlink()
        path.symlink_to(target) if target else os.mkfifo(path)
        return {}

    return setup


def _both(*setups: Callable[[Path], dict]) -> Callable[[Path], dict]:
    def setup(folder: Path) -> dict:
        env: dict = {}
        for s in setups:
            env |= s(folder) or {}
        return env

    return setup


def damaged_cache(folder: Path, name: str = "c") -> dict:
    """AUTOTUNE_CACHE=<name> holding an entry for each valid tiled point a dry run compiles
    (sm_90), each with its registers null and a cubin of four bytes: damaged by hand."""
    from autotune.gpu.compile import cache_key
    from autotune.kernels.limits import load_profile
    from autotune.kernels.render import DEFAULT_KERNEL, render
    from autotune.kernels.space import Space

    sp = Space.load("tiled")
    resources = {"registers": None, "spill_bytes": 0, "stack_bytes": 0, "smem_static_bytes": 0}
    for cfg in sp.enumerate(load_profile("h100")).valid:
        key = cache_key(render(sp.family.resolve(cfg)), "sm_90", DEFAULT_KERNEL)
        _write(folder / name / "nvrtc" / f"{key}.cubin", b"\x7fELF")
        _write(folder / name / "nvrtc" / f"{key}.json", json.dumps({"resources": resources, "log": ""}))
    return {"AUTOTUNE_CACHE": str(folder / name)}


def _rebuilt(folder: Path) -> None:
    for entry in (folder / "c" / "nvrtc").glob("*.json"):
        assert isinstance(json.loads(entry.read_text())["resources"]["registers"], int), entry


def _absent(*names: str) -> Callable[[Path], None]:
    def after(folder: Path) -> None:
        for n in names:
            assert not (folder / n).exists(), f"{n} was written"

    return after


def _whole_header(path: Path) -> None:
    text = path.read_text()
    assert "autotune_sgemm" in text and "#endif  // AUTOTUNE_TUNED_SGEMM_H" in text.splitlines()[-1], text[-200:]


# ---- the cases -------------------------------------------------------------------------------

_FP32_RANGE = "0, or a magnitude from 1.4e-45 to 3.4e+38"
_FP32 = f"a finite number FP32 holds ({_FP32_RANGE})"
_CFG = ("search", "--size", "64", "--family", "tiled", "--config", "space.yaml", "--dry-run")
_REPLAY = ("--family", "tiled", "--replay", "table.json")
# Each command that reads a results folder (--results), as a case runs it without a GPU.
_EVERY_RESULTS_COMMAND = (
    ("search", "--size", "64", *_REPLAY),
    ("export", "--size", "64"),
    ("check", "--static"),
    ("report",),
    ("list",),
)

CASES: list[Case] = [
    # -- sizes and shapes
    Case("size 0", ("search", "--size", "0")),
    Case("size not an integer", ("search", "--size", "1e10")),
    Case("size beyond a C int", ("search", "--size", "10000000000", "--dry-run")),
    Case("one dimension beyond a C int", ("search", "--m", "3000000000", "--n", "64", "--k", "64", "--dry-run")),
    Case("a batch beyond a C int", ("search", "--size", "64", "--batch", "2147483648", "--dry-run")),
    Case("beyond a C int in --sizes", ("search", "--sizes", "1024,3000000000", "--dry-run")),
    Case(
        "beyond a C int in a shapes file",
        ("search", "--shapes-file", "shapes.txt", "--dry-run"),
        setup=_files(**{"shapes.txt": "64x5000000000x64\n"}),
    ),
    Case(
        "beyond a C int on the replay path",
        ("search", "--m", "3000000000", "--n", "8", "--k", "8", *_REPLAY),
        setup=replay_table,
        after=_absent("results"),
        note="nothing written",
    ),
    Case(
        "operands no GPU holds, on the replay path",
        ("search", "--m", "8", "--n", "128", "--k", "2147483647", *_REPLAY),
        setup=replay_table,
        after=_absent("results"),
        silent=True,
        note="nothing written",
    ),
    Case(
        "a batch of operands no GPU holds in --sizes",
        ("search", "--sizes", "64,8192x8192x8192_b10000", "--dry-run"),
        silent=True,
    ),
    Case("incomplete shape", ("search", "--m", "10", "--n", "10")),
    Case("two shapes at once", ("search", "--size", "8", "--m", "8", "--n", "8", "--k", "8")),
    Case("a beta FP32 cannot hold in --sizes", ("search", "--sizes", "64_beta1e39", "--family", "tiled", "--dry-run")),
    Case("a batch of a digit that is not 0-9", ("search", "--sizes", "64_b²", "--family", "tiled", "--dry-run")),
    Case("shape list with text", ("search", "--sizes", "1024,abc", "--family", "tiled", "--dry-run")),
    Case("shapes file missing", ("search", "--shapes-file", "nope.txt", "--dry-run")),
    Case(
        "shapes file not UTF-8",
        ("search", "--shapes-file", "shapes.txt", "--dry-run"),
        setup=_files(**{"shapes.txt": b"\xff\xfe1024\n"}),
    ),
    Case(
        "a line of a megabyte in a shapes file (masking passwords in it once took hours)",
        ("search", "--shapes-file", "shapes.txt", "--dry-run"),
        setup=_files(**{"shapes.txt": "-a://b:" * 150_000 + "\n"}),
        note="the value quoted by its start and end, 200 characters in all",
        timeout=120,
    ),
    Case(
        "a family name of 130,000 letters",
        ("search", "--size", "64", "--family", "a" * 130_000),
        shown="autotune search --size 64 --family $(printf 'a%.0s' {1..130000})",
        timeout=120,
    ),
    # -- options
    Case("unknown family", ("search", "--size", "64", "--family", "nope")),
    Case("a path as a family", ("search", "--size", "64", "--family", "../etc")),
    Case("unknown sampler", ("search", "--size", "64", "--sampler", "cmaes")),
    Case("negative timeout", ("search", "--size", "64", "--timeout", "-1")),
    *(
        Case(
            f"{what} ({cmd[0]})",
            (*cmd, opt, value),
            f"autotune: error: argument {opt}: expected {want}, got '{value}' (see …)",
        )
        for what, cmd, opt, value, want in (
            (
                "a timeout of inf",
                ("search", "--size", "64"),
                "--timeout",
                "inf",
                "a number >= 0 and at most 1000000000",
            ),
            (
                "a candidate timeout of 0",
                ("search", "--size", "64"),
                "--candidate-timeout",
                "0",
                "a number > 0 and at most 1000000000",
            ),
            ("a tolerance of inf", ("check", "--static"), "--tolerance", "inf", "a number >= 0 and below 1"),
            ("a tolerance of nan", ("check", "--static"), "--tolerance", "nan", "a number >= 0 and below 1"),
            (
                "a tolerance of 1 (could never fail)",
                ("check", "--static"),
                "--tolerance",
                "1",
                "a number >= 0 and below 1",
            ),
            ("a negative tolerance", ("check", "--static"), "--tolerance", "-0.1", "a number >= 0 and below 1"),
            ("a beta of nan", ("search", "--size", "64"), "--beta", "nan", _FP32),
            ("a beta FP32 makes infinite", ("search", "--size", "64"), "--beta", "1e39", _FP32),
            ("a beta FP32 makes 0", ("search", "--size", "64"), "--beta", "1e-50", _FP32),
            (
                "a compile pool of a thousand threads",
                ("search", "--size", "64"),
                "--jobs",
                "1000",
                "a positive integer at most 256 (compile threads)",
            ),
            (
                "a window of 100,000 trials in flight",
                ("search", "--size", "64"),
                "--window",
                "100000",
                "a positive integer at most 4096 (trials in flight, each holding its compile)",
            ),
            ("a seed NumPy refuses", ("search", "--size", "64"), "--seed", "-1", "an integer from 0 to 4294967295"),
            ("a negative device", ("check",), "--device", "-1", "an integer from 0 to 2147483647"),
            ("a million workers", ("search", "--size", "64"), "--workers", "1000000", "an integer from 1 to 64"),
        )
    ),
    Case("unknown command", ("frobnicate",)),
    Case("an arch that is not sm_XX (search)", ("search", "--size", "64", "--arch", "x;rm", "--dry-run")),
    Case(
        "an arch that is not sm_XX (fuzz, once a traceback)", ("fuzz", "--compile-only", "--arch", "x;rm"), setup=record
    ),
    Case(
        "trials beyond a 64-bit integer",
        ("search", "--size", "64", *_REPLAY, "--trials", "9223372036854775808"),
        setup=replay_table,
        after=_absent("results"),
        note="before anything is measured or made",
    ),
    Case("an arch that is not sm_XX (list)", ("list", "--arch", "x;rm")),
    Case("replay table missing", ("search", "--size", "64", "--family", "tiled", "--replay", "nope.json")),
    *(
        Case(
            f"replay table: {what}",
            ("search", "--size", "64", *_REPLAY),
            f"autotune: error: table.json: not a replay table ({answer})",
            setup=_files(**{"table.json": json.dumps(doc)}),
            after=_absent("results"),
        )
        for what, doc, answer in (
            (
                "a GFLOP/s of 0",
                {"table": {"tiled_TILE16": 0}},
                "table['tiled_TILE16'] is 0, not a number >= 0.001 and at most 1e+12",
            ),
            (
                "a negative GFLOP/s",
                {"table": {"tiled_TILE16": -5}},
                "table['tiled_TILE16'] is -5, not a number >= 0.001 and at most 1e+12",
            ),
            (
                "cuBLAS GFLOP/s a string",
                {"table": {"tiled_TILE16": 900}, "cublas_gflops": "fast"},
                "cublas_gflops is 'fast', not a number >= 0.001 and at most 1e+12",
            ),
            ("'table' a list", {"table": [1, 2]}, "'table' must map config names to GFLOP/s or a status, got list"),
            ("a list", [1, 2], "a JSON object with table, cublas_gflops, delay_s expected, got list"),
            (
                "a status that is not one",
                {"table": {"tiled_TILE16": "ok"}},
                "table['tiled_TILE16'] is 'ok': a status is one of rejected, compile_failed, launch_failed, incorrect, "
                "timeout",
            ),
            ("a key that is not a config name", {"table": {"x\ny": 1}}, "table key 'x\\ny' is not a config name"),
            (
                "a misspelled key",
                {"table": {}, "cublas_gflop": 9},
                "unknown key 'cublas_gflop'; allowed: table, cublas_gflops, delay_s",
            ),
        )
    ),
    Case(
        "unreachable storage",
        ("search", "--size", "64", *_REPLAY, "--storage", "postgresql://nobody@127.0.0.1:9/none"),
        setup=replay_table,
        after=_absent("results"),
        note="no results written",
    ),
    *(
        Case(
            f"a SQLite URL {what}",
            ("search", "--size", "64", *_REPLAY, "--storage", url),
            f"autotune: error: storage '{url}': {answer}",
            setup=replay_table,
            after=_absent("results", "s.db", "s.db.lock"),
            note="no database left behind",
        )
        for what, url, answer in (
            (
                "with an argument of the wrong type",
                "sqlite:///s.db?timeout=abc",
                "ValueError: could not convert string to float: 'abc'",
            ),
            (
                "with an argument SQLite would ignore",
                "sqlite:///s.db?mode=ro",
                "SAWarning: Query string argument(s) 'mode' are not accepted by the pysqlite driver",
            ),
        )
    ),
    # -- space files (--config)
    *(
        Case(f"config: {what}", _CFG, setup=_files(**{"space.yaml": text}))
        for what, text in (
            ("malformed YAML", "space: {TILE: [8, 16\n"),
            ("unknown parameter", "space: {TILE: [8], SIZE: [2]}\n"),
            ("code where an integer belongs", "space: {TILE: ['16; asm(\"trap;\")']}\n"),
        )
    ),
    Case(
        "config: BM: 128.5",
        ("search", "--size", "64", "--family", "coarse2d", "--config", "space.yaml", "--dry-run"),
        setup=_files(**{"space.yaml": "space: {BM: [128.5], BN: [64], BK: [8], TM: [4], TN: [4]}\n"}),
    ),
    *(
        Case(f"config: {what}", _CFG, setup=_files(**{"space.yaml": text}))
        for what, text in (
            ("value outside its domain", "space: {TILE: [100]}\n"),
            ("no valid point", "space: {TILE: [4, 48, 64]}\n"),
            ("not UTF-8", b"space: {TILE: [\xff]}\n"),
        )
    ),
    # -- templates (front matter, Jinja, compile)
    Case(
        "template: misspelled front-matter key",
        ("search", "--size", "64", "--family", "typo", "--dry-run", "--sample", "1"),
        setup=_family("typo", lambda t: t.replace("constraints:", "constraint:", 1), base="coarse2d"),
    ),
    Case(
        "template: duplicate front-matter key",
        ("search", "--size", "64", "--family", "dup", "--dry-run"),
        setup=_family("dup", lambda t: t.replace("\ndescription:", "\ndescription: x\ndescription:", 1)),
    ),
    Case(
        "template: non-integer domain",
        ("search", "--size", "64", "--family", "frac", "--dry-run"),
        setup=_family("frac", lambda t: t.replace("domain: [1, 64]", "domain: [1, 64.5]", 1)),
    ),
    Case(
        "template: Jinja syntax error",
        ("search", "--size", "64", "--family", "jinja", "--dry-run"),
        setup=_family("jinja", lambda t: t.replace("__syncthreads();", "{% if %}__syncthreads();", 1)),
    ),
    *(
        Case(
            f"AUTOTUNE_CACHE {what} ({args[0]}{' --dry-run' if '--dry-run' in args else ' --count'})",
            args,
            answer,
            code=0,
            expect=(expect,),
            setup=setup,
            note="the cache is skipped: it only saves time",
            after=_absent("c/nvrtc", "c/counts"),
            slow=args[0] == "list",  # every space counted afresh
        )
        for what, setup in (
            ("names a file", lambda f: _files(c="")(f) | {"AUTOTUNE_CACHE": str(f / "c")}),
            ("is a link to nothing", lambda f: _link("c", "nowhere")(f) | {"AUTOTUNE_CACHE": str(f / "c")}),
        )
        for args, answer, expect in (
            (("list", "--count"), "every family counted (coarse1d: 215 valid of 625 …)", "215 valid of 625"),
            (
                ("search", "--size", "64", "--family", "tiled", "--dry-run"),
                "the dry run's table (tiled: … 4/4 compiled …)",
                "4/4",
            ),
        )
    ),
    Case("AUTOTUNE_TEMPLATES names no folder", ("list",), setup=lambda f: {"AUTOTUNE_TEMPLATES": "/nonexistent"}),
    Case(
        "template that fails to compile",
        ("search", "--size", "64", "--family", "bad", "--dry-run", "--jobs", "1"),
        expect=("every statically valid point failed to compile", 'error: identifier "undefined_thing" is undefined'),
        setup=_family("bad", lambda t: t.replace("__syncthreads();", "__syncthreads(); undefined_thing();", 1)),
        stdout=("bad: 4 x compile_failed: NVRTC_ERROR_COMPILATION (6):",),
    ),
    Case(
        "the same with --verbose",
        ("search", "--size", "64", "--family", "bad", "--dry-run", "--jobs", "1", "--verbose"),
        expect=("every statically valid point failed",),
        setup=_family("bad", lambda t: t.replace("__syncthreads();", "__syncthreads(); undefined_thing();", 1)),
        stdout=("1 error detected in the compilation of",),
    ),
    Case(
        "no NVRTC (installed without the cuda13/cuda12 extra)",
        ("search", "--size", "64", "--family", "tiled", "--dry-run"),
        setup=_no_nvrtc,
    ),
    Case(
        "installed from a wheel (pip install .)",
        ("list",),
        code=0,
        handled_by="tests/test_packaging.py and CI's wheel step",
    ),
    # -- untrusted input, as an attacker would write it
    Case("config: a recursive alias", _CFG, setup=_files(**{"space.yaml": "space: {TILE: &x [16, *x]}\n"}), timeout=60),
    Case(
        "template: a recursive alias in the declaration",
        ("list",),
        setup=_family("loop", lambda t: t.replace("\ndescription:", "\nx: &x [1, *x]\ndescription:", 1)),
        timeout=60,
    ),
    Case(
        "config: a space too large to enumerate",
        ("search", "--size", "64", "--family", "coarse1d", "--config", "space.yaml", "--dry-run"),
        setup=_files(
            **{
                "space.yaml": "space: {"
                + ", ".join(f"{p}: {list(range(1, n + 1))}" for p, n in (("BM", 256), ("BN", 256), ("BK", 64)))
                + f", TM: {list(range(1, 17))}, TRANS_A: [0, 1], TRANS_B: [0, 1], BATCHED: [0, 1]}}\n"
            }
        ),
        shown="autotune search --size 64 --family coarse1d --config space.yaml --dry-run  # BM: [1, ..., 256], …",
        timeout=60,
    ),
    Case(
        "template: its code raises while rendering ({{ 1 // 0 }})",
        ("search", "--size", "64", "--family", "raise", "--dry-run"),
        setup=_family("raise", lambda t: t.replace("__syncthreads();", "{{ 1 // 0 }}__syncthreads();", 1)),
    ),
    Case(
        "template: raises, on the replay path",
        ("search", "--size", "64", "--family", "raise", *_REPLAY[2:]),
        setup=lambda f: (
            replay_table(f)
            | _family("raise", lambda t: t.replace("__syncthreads();", "{{ 1 // 0 }}__syncthreads();", 1))(f)
        ),
        after=_absent("results"),
        silent=True,
        note="nothing written",
    ),
    Case(
        "template: reaches for Python (without the sandbox, it ran a shell command)",
        ("search", "--size", "64", "--family", "escape", "--dry-run"),
        setup=_family(
            "escape",
            lambda t: t.replace(
                "__syncthreads();",
                "{{ cycler.__init__.__globals__.os.popen('touch pwned').read() }}__syncthreads();",
                1,
            ),
        ),
        after=_absent("pwned"),
        note="nothing run",
    ),
    Case(
        "AUTOTUNE_CACHE: entries damaged (registers null; once a traceback)",
        ("search", "--size", "64", "--family", "tiled", "--dry-run"),
        expect=("4/4",),
        code=0,
        setup=damaged_cache,
        after=_rebuilt,
        note="a damaged entry is a miss: compiled and written again",
    ),
    Case(
        "fuzz --repro nested too deeply",
        ("fuzz", "--repro", "[" * 5000 + "]" * 5000),
        shown="autotune fuzz --repro '[[[…]]]'  # 5,000 deep",
    ),
    # -- work that would take hours
    Case("dry run of the default spaces", ("search", "--size", "4096", "--dry-run"), timeout=600, slow=True),
    Case(
        "search of 100,000 trials a family",
        ("search", "--size", "4096", "--trials", "100000", "--replay", "table.json"),
        setup=replay_table,
        after=_absent("results"),
    ),
    Case(
        "the same where the space is small",
        ("search", "--size", "4096", "--trials", "100000", *_REPLAY, "--quiet"),
        code=0,
        expect=("wrote results/",),
        setup=replay_table,
    ),
    # -- results and output paths
    *(
        Case(
            f"--results names a file ({cmd[0]})",
            (*cmd, "--results", "f.txt"),
            "autotune: error: --results f.txt: is a file, not a folder",
            setup=_files(**{"f.txt": ""}),
        )
        for cmd in _EVERY_RESULTS_COMMAND
    ),
    *(
        Case(
            f"--results a link to nothing ({cmd[0]})",
            (*cmd, "--results", "gone"),
            "autotune: error: --results gone: a symbolic link to nothing (nowhere)",
            setup=_both(_link("gone", "nowhere"), replay_table),
            after=_absent("nowhere", "results"),
        )
        for cmd in _EVERY_RESULTS_COMMAND
    ),
    Case(
        "a GPU's results folder a link to nothing",
        ("search", "--size", "64", *_REPLAY),
        setup=_both(_dirs("results"), _link(f"results/{SLUG}", "nowhere"), replay_table),
        after=_absent("results/nowhere"),
    ),
    *(
        Case(
            f"{what} in the GPU's results folder",
            ("search", "--size", "64", *_REPLAY),
            f"autotune: error: results/{SLUG}/{name}: is {kind}, not a regular file: not followed or opened (remove "
            "it)",
            setup=_both(replay_table, _victim, _planted(name, target)),
            after=lambda f: (_untouched_victim(f), _absent("created", f"results/{SLUG}/64x64x64.json")(f)),
            note="said before searching: nothing measured",
            silent=True,
            timeout=120,
        )
        for what, name, target, kind in (
            ("optuna.db a link to another program's database", "optuna.db", "../../victim.db", "a symbolic link"),
            ("SQLite's log a link beside optuna.db", "optuna.db-wal", "../../victim.db", "a symbolic link"),
            (".autotune.lock a link", ".autotune.lock", "../../created", "a symbolic link"),
            (".autotune.lock a pipe", ".autotune.lock", None, "a pipe"),
        )
    ),
    Case(
        "a record a link in the GPU's results folder",
        ("search", "--size", "64", *_REPLAY),
        setup=_both(replay_table, _victim, _planted("64x64x64.json", "../../victim.db")),
        after=_untouched_victim,
        note="said before searching: nothing measured",
        silent=True,
    ),
    Case(
        "optuna.db a link to another program's database (report)",
        ("report",),
        setup=_records_and(_victim, _planted("optuna.db", "../../victim.db")),
        after=_untouched_victim,
    ),
    Case(
        "report -o a link to nothing",
        ("report", "-o", "gone"),
        setup=_records_and(_link("gone", "nowhere")),
        after=_absent("nowhere"),
    ),
    Case(
        "--storage the results folder itself",
        ("search", "--size", "64", *_REPLAY, "--storage", "sqlite:///results"),
        setup=replay_table,
        after=_absent("results", "results.lock"),
        note="said before searching: no database made where the folder goes",
    ),
    Case(
        "read-only results folder, --storage elsewhere",
        ("search", "--size", "64", *_REPLAY, "--storage", "sqlite:///s.db"),
        setup=_records_and(replay_table),
        readonly=(f"results/{SLUG}",),
        after=_absent("s.db"),
        note="said before searching: no study started",
    ),
    *(
        Case(
            f"a GPU's results folder that cannot be read ({cmd[0]}; once {once})",
            cmd,
            f"autotune: error: results/{SLUG}: cannot read the GPU's results folder (Permission denied)",
            setup=record,
            unreadable=(f"results/{SLUG}",),
        )
        for cmd, once in (
            (("list",), "no results listed, and exit 0"),
            (("export", "--size", "64"), "'no results under results: run autotune search first'"),
            (("check", "--static"), "'no results under results: run autotune search first'"),
            (("report", "-o", "rep"), "'no results under results: run autotune search first'"),
        )
    ),
    Case("a results folder that cannot be read (list)", ("list",), setup=record, unreadable=("results",)),
    Case("a record that cannot be read (list)", ("list",), setup=record, unreadable=(f"results/{SLUG}/64x64x64.json",)),
    Case(
        "export into a read-only folder",
        ("export", "--size", "64", "-o", "ro/t.h"),
        setup=_records_and(_dirs("ro")),
        readonly=("ro",),
    ),
    Case(
        "export onto a folder",
        ("export", "--size", "64", "-o", "out"),
        setup=_records_and(_dirs("out")),
        note="no temporary file left in it",
    ),
    Case(
        "export into a folder that does not exist",
        ("export", "--size", "64", "-o", "a/b/c.h"),
        setup=record,
        after=_absent("a"),
        note="no folder made",
    ),
    Case("export onto a pipe", ("export", "--size", "64", "-o", "fifo"), setup=_records_and(_fifo)),
    Case("report into a read-only folder", ("report", "-o", "ro"), setup=_records_and(_dirs("ro")), readonly=("ro",)),
    Case("report onto a file", ("report", "-o", "f.txt"), setup=_records_and(_files(**{"f.txt": ""}))),
    Case(
        "report into a folder that does not exist",
        ("report", "-o", "a/b/c"),
        setup=record,
        after=_absent("a"),
        note="no folder made",
    ),
    *(
        Case(
            f"a name too long for the file system ({cmd[0]})",
            cmd,
            "autotune: error: xxx…x: File name too long",
            setup=record,
            shown="autotune " + " ".join(cmd[:-1]) + " $(printf 'x%.0s' {1..300})",
        )
        for cmd in (("report", "-o", "x" * 300), ("export", "--size", "64", "-o", "x" * 300))
    ),
    Case("export of a shape never tuned", ("export", "--size", "128"), setup=record),
    Case("no results folder", ("export", "--size", "64", "--results", "nope")),
    Case("a GPU with no results", ("check", "--gpu", "Some GPU"), setup=record),
    # -- stored records edited or damaged by hand
    Case(
        "record: not JSON",
        ("list",),
        setup=lambda f: record(f) | _files(**{f"results__{SLUG}__64x64x64.json": "{broken"})(f),
    ),
    Case(
        "record: a FIFO",
        ("list",),
        setup=lambda f: record(f) | _refifo(f / "results" / SLUG / "64x64x64.json"),
        timeout=120,
    ),
    Case("shapes file: /dev/zero", ("search", "--shapes-file", "/dev/zero", "--dry-run"), timeout=120),
    Case(
        "record: gflops is a string",
        ("list",),
        setup=lambda f: record(f, _set(("families", "tiled", "gflops"), "fast")),
    ),
    Case(
        "record: cuBLAS GFLOP/s is a string",
        ("export", "--size", "64"),
        setup=lambda f: record(f, _set(("families", "tiled", "cublas", "gflops"), "5000")),
    ),
    Case(
        "record: best names a family it does not hold",
        ("list",),
        setup=lambda f: record(f, _set(("best",), "warptile")),
    ),
    Case(
        "record: a parameter that is not an integer",
        ("export", "--size", "64"),
        setup=lambda f: record(f, _set(("families", "tiled", "config", "params", "TILE"), "32")),
    ),
    Case("record: a size beyond a C int", ("list",), setup=lambda f: record(f, _set(("problem", "M"), 3000000000))),
    Case("record: schema true", ("list",), setup=lambda f: record(f, _set(("schema",), True))),
    Case(
        "record: a GFLOP/s of 301 digits, its time made to agree",
        ("list",),
        setup=lambda f: record(f, _agreeing(("families", "tiled", "gflops"), 1e300)),
    ),
    Case(
        "record: another GPU's record in this GPU's folder",
        ("export", "--size", "64"),
        setup=lambda f: record(f, _another_gpu),
    ),
    # -- output
    Case(
        "stdout closed early",
        ("list",),
        expect=("cannot write to standard output (Broken pipe)",),
        stdout_to="gone",
        shown="autotune list | head -1",
    ),
    Case("stdout on a full disk", ("list",), stdout_to="full", shown="autotune list > /dev/full"),
    Case("stdout closed", ("list",), stdout_to="closed", shown="autotune list >&-"),
    Case(
        "export's message on a full disk",
        ("export", "--size", "64", "-o", "t.h"),
        setup=record,
        stdout_to="full",
        after=lambda f: _whole_header(f / "t.h"),
        note="the header itself is written whole first",
        shown="autotune export --size 64 -o t.h > /dev/full",
    ),
    Case("export onto /dev/full", ("export", "--size", "64", "-o", "/dev/full"), setup=record),
    Case(
        "two searches of one shape and results folder at once",
        (),
        code=0,
        shown="autotune search --size S … & autotune search --size S …",
        handled_by="tests/cli/test_hostile.py::test_two_processes_updating_one_record_lose_nothing",
    ),
    Case(
        "random argument lists",
        (),
        code=0,
        shown="autotune search …",
        handled_by="tests/search/test_robust.py::test_cli_arguments_never_trace_back",
    ),
    Case(
        "generated command lines",
        (),
        code=0,
        shown="autotune search|export|check|list|report …",
        handled_by="tests/cli/test_hostile_generated.py::test_generated_command_lines_end_well",
    ),
    Case(
        "random space files",
        (),
        code=0,
        shown="autotune search --config …",
        handled_by="tests/search/test_robust.py::test_config_loader_accepts_valid_or_raises_user_error",
    ),
]


# ---- running one -----------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


class CannotDemote(Exception):
    """Root, and no setpriv to run the case as 'nobody': its read-only folders cannot be tested."""


def _as_nobody() -> list[str]:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise CannotDemote("read-only folders mean nothing to root, and setpriv (util-linux) is not installed")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def run_case(case: Case, folder: Path) -> Outcome:
    """Set the case up in `folder` and run it there. Read-only and unreadable folders mean nothing
    to root, so under root such a case runs as 'nobody' through setpriv (the folder opened to it),
    or raises CannotDemote without setpriv."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    extra = case.setup(folder) if case.setup else {}
    for k, v in (extra or {}).items():
        env[k] = f"{v}{os.pathsep}{env[k]}" if k == "PYTHONPATH" else v
    demote = bool(case.readonly or case.unreadable) and os.geteuid() == 0
    if demote:
        env |= {"AUTOTUNE_CACHE": str(folder / ".cache"), "HOME": str(folder), "MPLCONFIGDIR": str(folder / ".cache")}
        for p in [folder, *folder.rglob("*")]:
            p.chmod(0o777 if p.is_dir() else 0o666)
    for name in case.readonly:
        (folder / name).chmod(0o555)
    for name in case.unreadable:
        (folder / name).chmod(0o000)
    argv = [*(_as_nobody() if demote else []), sys.executable, "-m", "autotune.cli", *case.args]
    try:
        if case.stdout_to:
            return _run_with_stdout(case, argv, folder, env)
        p = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=case.timeout)
        return Outcome(p.returncode, p.stdout, p.stderr)
    finally:
        for name in (*case.readonly, *case.unreadable):
            (folder / name).chmod(0o755)


def _run_with_stdout(case: Case, argv: list[str], folder: Path, env: dict) -> Outcome:
    """Run with stdout a pipe nobody reads ("gone"), /dev/full ("full") or closed ("closed")."""
    kind = case.stdout_to
    if kind == "gone":
        r, w = os.pipe()
        os.close(r)
        out, pre = w, None
    elif kind == "full":
        out, pre = os.open("/dev/full", os.O_WRONLY), None
    elif kind == "closed":
        out, pre = subprocess.DEVNULL, lambda: os.close(1)
    else:
        raise ValueError(f"stdout_to {kind!r}")
    try:
        p = subprocess.run(
            argv,
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=case.timeout,
            preexec_fn=pre,
        )
    finally:
        if isinstance(out, int) and out >= 0:
            os.close(out)
    return Outcome(p.returncode, "", p.stderr)


# ---- the table -------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _answer(case: Case) -> str:
    """The error line as code, less its `autotune: error: ` (the page says so once), words around it as words."""
    i = case.answer.find(PREFIX)
    text = case.answer if i < 0 else f"{case.answer[:i]}`{case.answer[i + len(PREFIX) :]}`"
    return _cell(text + (f" ({case.note})" if case.note else ""))


@functools.cache
def _page_rows() -> dict[str, str]:
    """The results page's table of bad inputs: each row's input cell -> its answer cell."""
    page = (ROOT / "results" / "README.md").read_text(encoding="utf-8")
    rows = itertools.takewhile(lambda row: row.startswith("|"), page[page.index(HEAD) :].splitlines()[2:])
    return dict(row[2:-2].split(" | ", 1) for row in rows)


def _page_answer(case: Case) -> str:
    """The answer the page's table shows for `case`, as `_answer` renders it, read back."""
    text = _page_rows().get(_cell(case.input))
    if text is None:
        raise LookupError(f"results/README.md's table of bad inputs has no row for {case.input!r}")
    if not (case.code == 2 or case.handled_by):
        text = text.removesuffix(f" (exit {case.code})")
    text = text.replace("\\|", "|").removesuffix(f" ({case.note})" if case.note else "")
    if case.code != 2:
        return text
    i = text.index("`")  # the line as code: PREFIX where it opens
    return f"{text[:i]}{PREFIX}{text[i + 1 : -1]}"


def markdown() -> str:
    """The results page's table: what the user did and the answer (the exit code where not 2)."""
    rows = [HEAD, "|---|---|"]
    for c in CASES:
        code = "" if c.code == 2 or c.handled_by else f" (exit {c.code})"  # a dedicated test's answer says it
        rows.append(f"| {_cell(c.input)} | {_answer(c)}{code} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python tests/hostile_cases.py --markdown")
    sys.stdout.write(markdown())
