"""Generated hostile command lines: every command (search, export, check, list, report) with
options drawn from valid and invalid values -- numbers out of range, non-numbers, inf and nan,
huge integers, empty strings, paths that are files, folders, links (to a folder or to nothing),
FIFOs or missing, unicode and control characters -- each run as a subprocess in a fresh folder.

Whatever the line, autotune answers with exit 0 or 1 and no traceback, or exit 2 and exactly
one `autotune: error:` line on stderr, which quotes no value whole (at most QUOTE_CHARS
characters of one); it leaves no temporary file, makes no file or folder that the command line
did not ask for (a search's results folder and storage, export's header, report's folder, the
cache), changes no file it was not asked to write, reads no record it must refuse as good, and
writes no record that autotune refuses to read back (a value accepted that no search can mean,
as beta 1e39).

No line takes long: a search always names its family (tiled, 4 valid points, or a name that is
not one) and mostly runs with --replay or --dry-run (without either, and `check` without
--static, it says in one line that there is no GPU, or on a GPU runs those 4 points). The files
it is given are damaged now and then (a replay table's or a record's value made hostile, a
space or shapes file of hostile text, a link or a pipe planted in the GPU's results folder).
The default run is a fixed seed and 40 lines, two at a time (under 20 s on an idle machine):

    AUTOTUNE_HOSTILE_SEED=7 AUTOTUNE_HOSTILE_EXAMPLES=200 python -m pytest tests/cli/test_hostile_generated.py
    python -m pytest -m slow tests/cli/test_hostile_generated.py      # the long run: 600 lines

A failure lists each line that broke a rule with its folder's setup, to run again by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autotune.core.types import QUOTE_CHARS, UserError, clipped
from autotune.records.results import load_record
from autotune.records.validate import SHAPE_FILE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostile_cases import ROOT, SLUG, _victim, damaged_cache, record, replay_table

SEED = int(os.environ.get("AUTOTUNE_HOSTILE_SEED", "0"))
EXAMPLES = int(os.environ.get("AUTOTUNE_HOSTILE_EXAMPLES", "40"))
SLOW_EXAMPLES = 600
TIMEOUT_S = 300  # a line still running then hangs: that is a failure too

# ---- values ------------------------------------------------------------------------------------

# Hostile values, each pool for one kind of option. Paths are relative to the example's folder
# and never outside it (a search with --results .. would write beside it); the folder holds
# every one of them that exists (see _setup).
PATHS = [
    "table.json", "results", "f.txt", "bad.json", "d", "d/..", "gone", "ld", "fifo", "space.yaml",
    "shapes.txt", "missing", "missing/x/y.h", "", ".", "/dev/null", "/dev/full", "/dev/zero",
    "/nonexistent/x", "f.txt/x", "gone/x", "ü-名.json", "a\nb", "tab\tx", "-x", "x" * 300,
    "\x1b[31mred", " ", "d/", "results/" + SLUG, "results/" + SLUG + "/64x64x64.json",
]  # fmt: skip
INTS = [
    "0", "-1", "2147483647", "2147483648", "10000000000", "9" * 40, "1.5", "1e3", "inf", "nan",
    "-inf", "", " ", "x", "٣", "0x10", "1_0", "+5", "\n7", "\x1b[31m1", "3 ",
]  # fmt: skip
FLOATS = [*INTS, "1e308", "-0", "0.999999", "1e-320", "1", "4", "0.0", "1e9", "1000000001", "1e39", "1e-50"]
TEXT = ["", " ", "x", "\n", "ü", "名", "\x1b[2J", "a,b", "../x", "-", "--", "%s%n", "{{ 7*7 }}", "x" * 500]
TEXT.append("p://u:" * 20_000)  # 120 KB of URL user parts: masking them took a minute, quadratic
FAMILIES = ["nope", "../x", "", "TILED", "tiled\n", "tiled_x", "coarse1d", "a" * 130_000]
SHAPES = ["1024,abc", "", ",", "64x64", "3000000000", "64_xx", "0", "64,3000000000", "64_beta1e39", "64_b²"]
GPUS = ["NVIDIA H100 80GB HBM3", "Some GPU", "", "../x", ".", "results/" + SLUG, "d", "gone"]
ARCHS = ["sm_1", "sm_999", "sm_0", "x;rm", "", "SM_90", "sm_90\n", "sm_9a0"]
STORAGES = [
    "sqlite:///d", "sqlite:///missing/x.db", "sqlite:///f.txt", "x", "", "sqlite:///gone",
    "postgresql://nobody@127.0.0.1:9/none", "sqlite://", "redis://x", "sqlite:///fifo",
    "sqlite:///results", "sqlite:///table.json", "sqlite:///s.db?timeout=abc", "sqlite:///s.db?mode=ro",
]  # fmt: skip
HOSTILE = 0.25  # the chance that an option's value is drawn from the hostile pool


def _pool(valid: list[str], hostile: list[str]):
    """A value: mostly a valid one, so that lines get past the parser to the work; else hostile."""
    return lambda rng: rng.choice(hostile if rng.random() < HOSTILE else valid)


SIZE = _pool(["64", "64", "128", "33", "8", "1000"], INTS)
SHAPE = {"--size": SIZE, "--m": SIZE, "--n": SIZE, "--k": SIZE}
COMMON = {
    "--layout": _pool(["nn", "nt", "tn", "tt"], TEXT),
    "--batch": _pool(["1", "2"], INTS),
    "--beta": _pool(["0", "2", "-0.5"], FLOATS),
    "--precision": _pool(["highest", "high", "medium"], TEXT),
    "--results": _pool(["results", "results", "d", "ld", "newres"], PATHS),
}
OPTIONS: dict[str, dict] = {
    "search": {
        **SHAPE,
        **COMMON,
        "--sizes": _pool(["64,128", "8x8x8,64", "64_nt"], SHAPES + TEXT),
        "--shapes-file": _pool(["shapes.txt"], PATHS),
        "--table": None,
        "--family": _pool(["tiled"], FAMILIES),
        "--config": _pool(["space.yaml"], PATHS),
        "--no-seeds": None,
        "--priors": _pool([SLUG], GPUS + PATHS),
        "--trials": _pool(["2", "4", "100"], [*INTS, "9223372036854775808"]),
        "--timeout": _pool(["5", "0.5", "0"], FLOATS),
        "--sampler": _pool(["tpe", "random", "grid"], TEXT),
        "--seed": _pool(["0", "7", "4294967295"], INTS),
        "--storage": _pool(["sqlite:///s.db"], STORAGES),
        "--arch": _pool(["sm_90", "sm_80", "sm_90a", "sm_70"], ARCHS),
        "--device": _pool(["0"], INTS),
        "--workers": _pool(["1", "2"], ["0", "65", "x", "-1"]),
        "--window": _pool(["1", "8"], INTS),
        "--candidate-timeout": _pool(["30", "0.1"], FLOATS),
        "--replay": _pool(["table.json"], PATHS),
        "--jobs": _pool(["1", "2"], INTS),
        "--dry-run": None,
        "--sample": _pool(["1", "2"], INTS),
        "--quiet": None,
        "--verbose": None,
        "--yes": None,
        "--no-route": None,
    },
    "export": {
        **SHAPE,
        **COMMON,
        "--gpu": _pool([SLUG, "NVIDIA H100 80GB HBM3"], GPUS),
        "--family": _pool(["tiled"], FAMILIES),
        "--layouts": _pool(["nn,nt", "all", "nn"], ["nn,,nt", "xx", "", ","] + TEXT),
        "-o": _pool(["out.h", "d/out.h", "ld/out.h", "f.txt"], PATHS),
        "--prefix": _pool(["autotune", "big", "nt2_x"], ["Big", "at", "at_x", "a__b", "a_", "9a"] + TEXT),
        "--dispatch": None,
        "--sizes": _pool(["64,128", "8x8x8,64", "64_nt"], SHAPES + TEXT),
        "--shapes-file": _pool(["shapes.txt"], PATHS),
        "--table": None,
        "--kernels": _pool(["4", "all", "128"], ["0", "-1", "x", "1.5", "ALL", ""] + TEXT),
        "--library": _pool(["lib", "d/lib", "d"], PATHS),
    },
    "check": {
        "--gpu": _pool([SLUG], GPUS),
        "--tolerance": _pool(["0.05", "0.5", "0"], FLOATS),
        "--static": None,
        "--device": _pool(["0"], INTS),
        "--results": COMMON["--results"],
    },
    "report": {
        "--gpu": _pool([SLUG], GPUS),
        "--results": COMMON["--results"],
        "-o": _pool(["rep", "d/rep", "d"], PATHS),
    },
    "list": {"--arch": _pool(["sm_90", "sm_80"], ARCHS), "--count": None, "--results": COMMON["--results"]},
    # Without a GPU `fuzz` is one line, but for --compile-only, which compiles the stored kernels.
    "fuzz": {
        "--problems": _pool(["1", "5"], INTS),
        "--seed": _pool(["0", "7"], INTS),
        "--coverage": _pool(["0", "1"], INTS),
        "--results": COMMON["--results"],
        "--shrink": _pool(["0", "3"], INTS),
        "--repro": _pool(
            ['[{"regime": "tiny", "M": 2, "N": 3, "K": 4}]'],
            [*TEXT, "[]", "{}", "[1]", '[{"M": 1}]', "[" * 5000 + "]" * 5000],
        ),
        "--compile-only": None,
        "--gpu": _pool([SLUG], GPUS),
        "--arch": _pool(["sm_90"], ARCHS),
        "--seconds": _pool(["0", "10"], INTS),
        "--route": None,
        "--quiet": None,
    },
}
COMMANDS = ["search"] * 6 + ["export"] * 2 + ["check"] * 2 + ["list"] * 2 + ["report", "fuzz"]
# 30 searches; warptile's 31 million points; a compile of every stored kernel: kept rare
SLOW_FLAGS = {"--table": 0.1, "--count": 0.15, "--compile-only": 0.1}
# The environment's paths: AUTOTUNE_CACHE ("" is one outside the folder, shared by the examples)
# and AUTOTUNE_TEMPLATES ("" is the checkout's templates).
# "damaged": a cache whose entries for tiled's points have their registers null (damaged_cache).
CACHES = ["", "", "", "", "", "f.txt", "gone", "d", "fifo", "damaged"]
# "tpl": a folder that holds the hostile templates of TEMPLATE_FILES drawn as its damage.
TEMPLATES = [""] * 12 + ["d", "f.txt", "gone", "fifo", "tpl", "tpl"]


@dataclass
class Example:
    index: int
    argv: list[str]
    cache: str  # AUTOTUNE_CACHE inside the folder, or "" for the shared one
    templates: str = ""  # AUTOTUNE_TEMPLATES inside the folder, or "" for the checkout's
    damage: dict = field(default_factory=dict)  # what _setup damages in the folder's files
    outcome: tuple[int, str, str] | None = None
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        env = f"AUTOTUNE_CACHE={self.cache!r} " if self.cache else ""
        env += f"AUTOTUNE_TEMPLATES={self.templates!r} " if self.templates else ""
        env += f"damaged files {clipped(repr(self.damage), 2000)} " if self.damage else ""
        code, out, err = self.outcome or (None, "", "")
        return (
            f"example {self.index} (seed {SEED}): {env}autotune {clipped(repr(self.argv), 2000)}\n"
            f"  exit {code}; stderr: {err[-1500:]!r}\n  stdout (end): {out[-300:]!r}\n  " + "\n  ".join(self.problems)
        )


def command_line(rng: random.Random) -> tuple[list[str], str, str]:
    """One command line, its options in random order, each option's value mostly valid, else
    hostile (an option may come twice: argparse keeps the last), sometimes as --opt=value,
    sometimes a stray token; and the AUTOTUNE_CACHE and AUTOTUNE_TEMPLATES it runs with."""
    cmd = rng.choice(COMMANDS)
    options = OPTIONS[cmd]
    picked: list[list[str]] = []
    if cmd in ("search", "export") and rng.random() < 0.9:
        if rng.random() < 0.7:
            picked.append(["--size", SIZE(rng)])
        else:
            picked += [[d, SIZE(rng)] for d in ("--m", "--n", "--k")]
    if cmd == "search":
        # Never a GPU, never hours: a small family (tiled, 4 valid points, or a name that is not
        # one), and mostly a replay table or a dry run (without either: one line, no GPU).
        picked.append(["--family", options["--family"](rng)])
        mode = rng.random()
        if mode < 0.55:
            picked.append(["--replay", options["--replay"](rng)])
        elif mode < 0.9:
            picked.append(["--dry-run"])
        if rng.random() < 0.7:
            picked.append(["--quiet"])
    if cmd == "check" and rng.random() < 0.7:
        picked.append(["--static"])
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(list(options))
        # (export's --table only reads records: not slow)
        if name in SLOW_FLAGS and (cmd, name) != ("export", "--table") and rng.random() > SLOW_FLAGS[name]:
            continue
        if name == "--family" and cmd == "search":
            continue  # one family only, drawn above: two would be two searches
        value = options[name]
        if value is None:
            picked.append([name])
        elif rng.random() < 0.15:
            picked.append([f"{name}={value(rng)}"])
        else:
            picked.append([name, value(rng)])
    if rng.random() < 0.05:
        picked.append([rng.choice(["--frobnicate", "stray", "--", "-o", "-", "--results"])])
    rng.shuffle(picked)
    argv = [cmd, *(tok for group in picked for tok in group)]
    return argv, rng.choice(CACHES), rng.choice(TEMPLATES)


# ---- running one -------------------------------------------------------------------------------


def _setup(folder: Path, damage: dict[str, object]) -> None:
    record(folder, _change(damage["record"]) if "record" in damage else None)
    replay_table(folder)
    if "table.json" in damage:
        table = json.loads((folder / "table.json").read_text())
        _change(damage["table.json"])(table)
        (folder / "table.json").write_text(json.dumps(table))
    (folder / "f.txt").write_text("")
    (folder / "bad.json").write_text("{broken")
    (folder / "d").mkdir()
    (folder / "gone").symlink_to("nowhere")
    (folder / "ld").symlink_to("d")
    os.mkfifo(folder / "fifo")
    (folder / "space.yaml").write_text(damage.get("space.yaml", "space: {TILE: [8, 16]}\n"))
    (folder / "shapes.txt").write_text(damage.get("shapes.txt", "64\n128x64x32\n"))
    _victim(folder)  # another program's database beside the results: never written
    if "planted" in damage:
        name, target = damage["planted"]
        path = folder / "results" / SLUG / name
        path.unlink(missing_ok=True)
        path.symlink_to(target) if target else os.mkfifo(path)
    (folder / "tpl").mkdir()
    for name, text in (TEMPLATE_FILES[damage["tpl"]] if "tpl" in damage else {}).items():
        (folder / "tpl" / name).write_text(text)


# Damage to the folder's files, each drawn now and then: a value of the replay table or the
# stored record replaced by a hostile one, a space file or a shapes file of hostile text.
JSON_VALUES = [0, -1, -5.5, "x", "", None, [], {}, True, float("inf"), float("nan"), 1e13, 2**64, "ok", "5000", 1e-320]
TABLE_KEYS = [("table", "tiled_TILE16"), ("table", "tiled_TILE8"), ("cublas_gflops",), ("delay_s",), ("x",), ("table",)]
RECORD_KEYS = [
    ("families", "tiled", "gflops"), ("families", "tiled", "ratio"), ("families", "tiled", "time_ms"),
    ("families", "tiled", "cublas", "gflops"), ("families", "tiled", "config", "params", "TILE"),
    ("families", "tiled", "config", "family"), ("families", "tiled", "registers"), ("best",), ("problem", "M"),
    ("problem", "layout"), ("problem", "beta"), ("gpu", "slug"), ("schema",), ("families",), ("families", "tiled"),
    ("families", "tiled", "status"), ("families", "tiled", "error"), ("problem",),
]  # fmt: skip
# Damage to the record that every reader must refuse (each once read as good): a schema of
# `true`, another GPU's record in this one's folder, figures that disagree, fields of another type.
RECORD_REFUSED = [
    (("schema",), True),
    (("gpu",), {"name": "NVIDIA A100-SXM4-80GB", "slug": "nvidia-a100-sxm4-80gb", "arch": "sm_80"}),
    (("families", "tiled", "date"), "yesterday"),
    (("families", "tiled", "search"), {"seed": True}),
    (("families", "tiled", "time_min_ms"), 5.0),
    (("families", "tiled", "cublas", "time_ms"), 1.0),
    (("families", "tiled", "error"), 2.0),
    (("families", "tiled", "message"), 5),
]
# Files planted in the GPU's results folder: links (to another program's database beside it, or
# to a file that must not be made) and a pipe, where autotune keeps a file of its own.
PLANTED = [
    ("optuna.db", "../../victim.db"),
    ("optuna.db-wal", "../../victim.db"),
    (".autotune.lock", "../../created"),
    (".autotune.lock", None),
    ("64x64x64.json", "../../victim.db"),
]
SPACE_TEXTS = [
    "space: {TILE: [0]}", "{", "space: []", "- 1", "space: {TILE: [8.5]}", "family: coarse1d\nspace: {}",
    "space: {TILE: [8]}\nseeds: [{TILE: 999}]", "fallback: {TILE: 'x'}", "space: {TILE: [8, 8, 8]}", "",
    "space: {TILE: !!python/object/apply:os.system [true]}", "a: &a [*a]", "space: {TILE: [64]}",
    "space: {TILE: &x [16, *x]}",
    # coarse1d's whole domains (with --family coarse1d): 536,870,912 points
    "space: {" + ", ".join(f"{p}: {list(range(1, n + 1))}" for p, n in (("BM", 256), ("BN", 256), ("BK", 64)))
    + f", TM: {list(range(1, 17))}, TRANS_A: [0, 1], TRANS_B: [0, 1], BATCHED: [0, 1]}}",
]  # fmt: skip
# Templates for AUTOTUNE_TEMPLATES=tpl: tiled edited (it is found there first) or a family of its
# own. Each was once a hang, a traceback, or (without Jinja's sandbox) a command run.
_TILED = (ROOT / "templates" / "tiled.cu.j2").read_text()
_HUGE_PARAMS = "".join(f"  P{i}: {{domain: [1, 11], doc: x}}\n" for i in range(16))
TEMPLATE_FILES = [
    {"tiled.cu.j2": _TILED.replace("\ndescription:", "\nx: &x [1, *x]\ndescription:", 1)},
    {"tiled.cu.j2": _TILED.replace("__syncthreads();", "{{ 1 // 0 }}__syncthreads();", 1)},
    {"tiled.cu.j2": _TILED.replace("__syncthreads();", "{{ cycler.__init__.__globals__.os.popen('touch pwned') }}", 1)},
    {"tiled.cu.j2": "{#- autotune\n" + " \n" * 5000},
    {"tiled.cu.j2": _TILED.replace("__syncthreads();", "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", 1)},
    {"tiled.cu.j2": _TILED.replace("THREADS: TILE * TILE", "THREADS: " + "-" * 3000 + "TILE * TILE", 1)},
    {"tiled.cu.j2": _TILED.replace("__syncthreads();", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", 1)},
    {  # 11^16 points
        "huge.cu.j2": _TILED.replace("params:\n", "params:\n" + _HUGE_PARAMS, 1),
        "huge.yaml": "space:\n  TILE: [16]\n" + "".join(f"  P{i}: {list(range(1, 12))}\n" for i in range(16)),
    },
]  # fmt: skip
SHAPES_TEXTS = [
    "",
    "abc",
    "0",
    "64x64",
    "3000000000",
    "64 # c\n\n",
    "64_nt_nt",
    "ü",
    "64\r\n128",
    "1e3",
    "-64",
    "64,128",
    "-a://b:" * 150_000,  # a line of a megabyte: masking passwords in it took hours
]


def _change(keys_value):
    keys, value = keys_value

    def change(data):
        d = data
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return change


def damage_of(rng: random.Random) -> dict[str, object]:
    """Which of the folder's files are damaged, and how (empty mostly)."""
    out: dict[str, object] = {}
    if rng.random() < 0.15:
        out["table.json"] = (rng.choice(TABLE_KEYS), rng.choice(JSON_VALUES))
    if rng.random() < 0.15:
        out["record"] = (rng.choice(RECORD_KEYS), rng.choice(JSON_VALUES))
    if rng.random() < 0.15:
        out["space.yaml"] = rng.choice(SPACE_TEXTS)
    if rng.random() < 0.15:
        out["shapes.txt"] = rng.choice(SHAPES_TEXTS)
    if rng.random() < 0.05:
        out["record"] = rng.choice(RECORD_REFUSED)
    if rng.random() < 0.1:
        out["planted"] = rng.choice(PLANTED)
    if rng.random() < 0.5:
        out["tpl"] = rng.randrange(len(TEMPLATE_FILES))
    return out


def _snapshot(folder: Path) -> dict[str, str]:
    """Every path under `folder` (links not followed) -> its kind, and a regular file's hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(folder))
            if stat.S_ISREG(st.st_mode):
                out[rel] = "file " + hashlib.sha1(path.read_bytes()).hexdigest()
            else:
                out[rel] = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"
    return out


def _last(argv: list[str], *names: str, default: str | None = None) -> str | None:
    """The value argparse keeps for an option: its last occurrence (`--opt v` or `--opt=v`)."""
    value = default
    for i, tok in enumerate(argv):
        for name in names:
            if tok == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif tok.startswith(name + "="):
                value = tok[len(name) + 1 :]
    return value


def _written(ex: Example, folder: Path, code: int) -> list[Path]:
    """The paths the command line asked to be written (each with what is below it)."""
    argv, cmd = ex.argv, ex.argv[0]
    out = []
    if ex.cache in ("d", "damaged"):
        out.append(folder / ex.cache)
    if code == 2:
        return out
    results = _last(argv, "--results", default="results")
    if cmd == "search":
        out.append(folder / results)
        storage = _last(argv, "--storage") or ""
        if storage.startswith("sqlite:///"):
            db = storage[len("sqlite:///") :]
            # the database and its companions: SQLite's journals, the writers' lock (search/sqlite.py)
            out += [folder / f"{db}{end}" for end in ("", "-journal", "-wal", "-shm", ".lock")]
    elif cmd == "export":
        library = _last(argv, "--library")
        out.append(folder / (library if library is not None else _last(argv, "-o", default="tuned_sgemm.h")))
    elif cmd == "report":
        output = _last(argv, "-o")
        out.append(folder / output if output is not None else folder / results)
    return out


def _under(path: Path, roots: list[Path]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip("/") + "/") or str(path).startswith(str(root).rstrip("/") + "/"):
            return True
    return False


def _judge(ex: Example, folder: Path, before: dict[str, str]) -> None:
    code, out, err = ex.outcome
    if "Traceback" in out + err or "Exception ignored" in err:
        ex.problems.append("a traceback")
    if code not in (0, 1, 2):
        ex.problems.append(f"exit code {code}")
    lines = err.strip().splitlines()
    if code == 2 and not (len(lines) == 1 and lines[0].startswith("autotune: error: ")):
        ex.problems.append(f"exit 2 with {len(lines)} lines on stderr, not one 'autotune: error:' line")
    if code in (0, 1) and "autotune: error:" in err:
        ex.problems.append(f"exit {code} with an error line")
    if any(len(word) > QUOTE_CHARS for ln in lines if ln.startswith("autotune: ") for word in ln.split()):
        ex.problems.append(f"an error line quotes a value whole (a run of more than {QUOTE_CHARS} characters)")
    reads_it = ex.argv[0] in ("list", "check", "report") and _last(ex.argv, "--results", default="results") == "results"
    if reads_it and ex.damage.get("record") in RECORD_REFUSED and code != 2:
        ex.problems.append(f"exit {code} reading a record it must refuse")
    after = _snapshot(folder)
    tmp = [p for p in after if p.endswith(".tmp")]
    if tmp:
        ex.problems.append(f"temporary files left: {tmp}")
    allowed = _written(ex, folder, code)
    made = sorted(p for p in after if p not in before and not _under(folder / p, allowed))
    if made:
        ex.problems.append(f"made what was not asked for: {made[:8]}")
    changed = sorted(p for p in before if after.get(p) != before[p] and not _under(folder / p, allowed))
    if changed:
        ex.problems.append(f"changed or removed what was not asked for: {changed[:8]}")
    for p in sorted(p for p in after if after[p] != before.get(p) and SHAPE_FILE.match(Path(p).name)):
        if after[p].startswith("file "):
            try:
                load_record(folder / p)
            except UserError as exc:
                ex.problems.append(f"wrote a record autotune refuses: {exc}")


def run_example(ex: Example, cache: Path) -> Example:
    folder = Path(tempfile.mkdtemp(prefix="autotune-generated-"))
    try:
        _setup(folder, ex.damage)
        if ex.cache == "damaged":
            damaged_cache(folder, "damaged")
        before = _snapshot(folder)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AUTOTUNE_CACHE": str(folder / ex.cache) if ex.cache else str(cache),
            "HOME": str(cache / "home"),
            "MPLCONFIGDIR": str(cache / "mpl"),
        }
        env.pop("AUTOTUNE_TEMPLATES", None)
        if ex.templates:
            env["AUTOTUNE_TEMPLATES"] = str(folder / ex.templates)
        try:
            p = subprocess.run(
                [sys.executable, "-m", "autotune.cli", *ex.argv],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="backslashreplace",
                timeout=TIMEOUT_S,
            )
            ex.outcome = (p.returncode, p.stdout, p.stderr)
        except subprocess.TimeoutExpired as exc:
            ex.outcome = (-1, str(exc.stdout or "")[-2000:], str(exc.stderr or "")[-2000:])
            ex.problems.append(f"still running after {TIMEOUT_S} s")
            return ex
        _judge(ex, folder, before)
        return ex
    finally:
        for p in [folder, *folder.rglob("*")]:  # a case may have left a folder read-only
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def _run(examples: int, seed: int, tmp_path: Path) -> None:
    cases = []
    for i in range(examples):
        rng = random.Random(f"{seed}-{i}")
        cases.append(Example(i, *command_line(rng), damage=damage_of(rng)))
    cache = tmp_path / "cache"
    cache.mkdir()
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda ex: run_example(ex, cache), cases))
    bad = [ex for ex in done if ex.problems]
    assert not bad, f"{len(bad)} of {len(done)} generated command lines broke a rule:\n\n" + "\n\n".join(
        ex.describe() for ex in bad
    )
    codes = {c: sum(1 for ex in done if ex.outcome[0] == c) for c in (0, 1, 2)}
    assert codes[2] < len(done), codes  # not every line an error: the generator reaches the work too


@pytest.mark.slow  # hundreds of generated command lines, each a process: 25 s on two cores (CI's slow step)
def test_generated_command_lines_end_well(tmp_path):
    _run(EXAMPLES, SEED, tmp_path)


@pytest.mark.slow
def test_generated_command_lines_end_well_long_run(tmp_path, request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the long run: python -m pytest -m slow tests/cli/test_hostile_generated.py")
    _run(SLOW_EXAMPLES, SEED + 1, tmp_path)


def test_the_generator_reaches_every_command_and_option():
    """Over the default run's seeds, every command comes, and every option of it somewhere in
    the long run's: a new option must be given a pool of values here."""
    from autotune import cli

    seen: dict[str, set[str]] = {c: set() for c in OPTIONS}
    for i in range(SLOW_EXAMPLES):
        argv, _, _ = command_line(random.Random(f"{SEED}-{i}"))
        seen[argv[0]] |= {t.split("=")[0] for t in argv[1:] if t.startswith("-")}
    parser = cli.build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    assert set(commands.choices) == set(OPTIONS)
    for name, sub in commands.choices.items():
        declared = {a.option_strings[-1] if a.option_strings[-1] != "--output" else "-o" for a in sub._actions}
        declared -= {"--help"}
        assert declared <= set(OPTIONS[name]), (name, declared - set(OPTIONS[name]))
        assert set(OPTIONS[name]) <= seen[name], (name, set(OPTIONS[name]) - seen[name])


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The judge itself: a traceback, two error lines, a left temporary file, a folder nobody
    asked for, a changed file, an error line quoting a long value whole and a record that must
    be refused read as good are each reported."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "keep.txt").write_text("x")
    before = _snapshot(folder)
    ex = Example(0, ["list"], "", outcome=(2, "", "Traceback (most recent call last):\nautotune: error: x\n"))
    (folder / "a.json.123.tmp").write_text("")
    (folder / "newdir").mkdir()
    (folder / "keep.txt").write_text("y")
    (folder / "newdir" / "64x64x64.json").write_text("{}")
    _judge(ex, folder, before)
    text = "\n".join(ex.problems)
    for fragment in ("a traceback", "exit 2 with 2 lines", "temporary files left", "newdir", "keep.txt", "refuses"):
        assert fragment in text, text
    (folder / "a.json.123.tmp").unlink()
    shutil.rmtree(folder / "newdir")
    whole = Example(2, ["search"], "", outcome=(2, "", f"autotune: error: family '{'a' * 300}': unknown\n"))
    _judge(whole, folder, _snapshot(folder))
    assert "quotes a value whole" in "\n".join(whole.problems)
    trusted = Example(3, ["list"], "", damage={"record": RECORD_REFUSED[0]}, outcome=(0, "", ""))
    _judge(trusted, folder, _snapshot(folder))
    assert "reading a record it must refuse" in "\n".join(trusted.problems)
    ok = Example(1, ["export", "-o", "out.h"], "", outcome=(0, "wrote out.h", ""))
    before = _snapshot(folder)
    (folder / "out.h").write_text("header")
    _judge(ok, folder, before)
    assert ok.problems == []
    assert json.dumps(ok.argv)  # plain data, printable in a report
