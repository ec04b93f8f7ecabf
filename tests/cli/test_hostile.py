"""Hostile input: every case of tests/hostile_cases.py (the table of bad inputs on the results page) is one
line and exit 2, or its documented success, with nothing half-written; and the pieces behind
them: records validated on load and merged under a lock, strict integers, the work estimate,
the count cache, NVRTC's log."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autotune import cli
from autotune.cli import dry_run as cli_dry_run
from autotune.cli import inputs as cli_inputs
from autotune.cli import stored as cli_stored
from autotune.core.types import Config, Problem, UserError
from autotune.kernels import counts
from autotune.kernels.family import Family
from autotune.kernels.limits import load_profile
from autotune.kernels.space import Space
from autotune.records.results import load_record, record_path
from autotune.records.store import atomic_write_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import hostile_cases
from hostile_cases import CASES, ROOT, SLUG, record, run_case


def _params():
    out = []
    for c in CASES:
        marks = []
        if c.handled_by:
            marks.append(pytest.mark.skip(reason=f"checked by {c.handled_by}"))
        elif c.owner:
            marks.append(pytest.mark.xfail(reason=c.owner, strict=False))
        if c.slow:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(c, id=c.input, marks=marks))
    return out


@pytest.fixture
def case_folder(tmp_path):
    # A case that runs as 'nobody' (read-only folders under root) needs a folder it can reach;
    # pytest's own are private to their owner.
    folder = Path(tempfile.mkdtemp(prefix="autotune-hostile-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("case", _params())
def test_hostile_input(case, case_folder):
    try:
        out = run_case(case, case_folder)
    except hostile_cases.CannotDemote as exc:
        pytest.skip(str(exc))
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    assert out.code == case.code, (out.code, out.stdout[-2000:], out.stderr)
    if case.code == 2:
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("autotune: error: "), out.stderr
        for fragment in case.fragments:
            assert fragment in lines[0], fragment
    else:
        for fragment in case.fragments:
            assert fragment in out.stdout
    for fragment in case.stdout:
        assert fragment in out.stdout
    if case.silent:
        assert out.stdout == "", out.stdout[-2000:]
    left = [p for p in case_folder.rglob("*.tmp")]
    assert not left, f"half-written files left: {left}"
    if case.after:
        case.after(case_folder)


def test_the_table_shows_what_is_checked():
    for c in CASES:
        assert c.fragments or c.handled_by or c.stdout or c.after, c.input  # each case checks something
        for fragment in c.fragments:
            assert fragment in c.answer, (c.input, fragment)
    assert len({c.input for c in CASES}) == len(CASES)


def test_the_results_page_holds_a_row_a_case_in_order_and_in_form():
    table = hostile_cases.markdown()  # every answer read back from the page, rendered again
    page = (ROOT / "results" / "README.md").read_text()
    assert table in page, "results/README.md's table of bad inputs: `python tests/hostile_cases.py --markdown`"
    r = subprocess.run(
        [sys.executable, "tests/hostile_cases.py", "--markdown"], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stdout == table


# ---- records ---------------------------------------------------------------------------------

_WRITER = r"""
import sys, time
from autotune.records.store import make_entry, update_record
from autotune.core.types import Config, Measurement, Problem, Status

root, who, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
P = Problem(64, 64, 64)
GPU = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "arch": "sm_90"}

def entry(family, tile, gflops):
    m = Measurement(Config.make(family, {"TILE": tile}), P, Status.OK, time_ms=P.flops / gflops / 1e6,
                    repeats=1, gflops=gflops, error=1e-7)
    return make_entry(m, {"gflops": 1000.0}, search={}, versions={}, command="", limits={})

while time.time() < start:
    time.sleep(0.005)
for i in range(n):
    # Both write "tiled" (their own config, faster each time: the best of all must win) and a
    # family of their own per step (none may be lost).
    shared = 1000.0 + 2 * i + (1 if who == "b" else 0)
    update_record(root, GPU, P, {"tiled": entry("tiled", 8 if who == "a" else 16, shared),
                                 f"{who}{i}": entry(f"{who}{i}", 4, 10.0 + i)})
"""


def test_two_processes_updating_one_record_lose_nothing(tmp_path):
    n = 60
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    start = time.time() + 2.0  # both past their imports, then at once
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "results"), who, str(n), str(start)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    rec = load_record(record_path(tmp_path / "results", SLUG, Problem(64, 64, 64)))
    fams = rec["families"]
    assert set(fams) == {"tiled"} | {f"{w}{i}" for w in "ab" for i in range(n)}  # not one lost
    assert fams["tiled"]["gflops"] == 1000.0 + 2 * (n - 1) + 1  # b's last: the best of both
    assert fams["tiled"]["config"]["params"] == {"TILE": 16} and rec["best"] == "tiled"
    assert not list((tmp_path / "results").rglob("*.tmp"))


_T = ("families", "tiled")


def _bad(tmp_path, change) -> Path:
    record(tmp_path, change)
    return record_path(tmp_path / "results", SLUG, Problem(64, 64, 64))


@pytest.mark.parametrize(
    "keys, value, fragment",
    [
        ((*_T, "gflops"), "4000", "gflops is '4000', not a positive number"),
        ((*_T, "gflops"), float("nan"), "gflops is nan"),
        ((*_T, "gflops"), True, "gflops is True"),
        ((*_T, "gflops"), -5, "gflops is -5"),
        ((*_T, "ratio"), None, "ratio is None"),
        ((*_T, "time_ms"), "0.1", "time_ms is '0.1'"),
        ((*_T, "cublas", "gflops"), "x", "cublas.gflops is 'x'"),
        ((*_T, "cublas"), [], "'cublas' is not an object"),
        ((*_T, "error"), "small", "error is 'small'"),
        ((*_T, "registers"), 40.5, "registers is 40.5"),
        ((*_T, "config", "params"), [32], "parameters must map names to values"),
        ((*_T, "config", "params", "TILE"), 32.0, "parameter TILE must be an integer, got 32.0"),
        (("best",), "warptile", "'best' is 'warptile', not one of its families (tiled)"),
        (("best",), None, "'best' is None"),
        (("families",), [], "'families' is not an object"),
        (("problem", "N"), 65, "the file of 64x64x64 holds 64x65x64"),
        (("problem", "K"), 2**31, "K=2147483648 is more than 2147483647"),
        (("gpu", "slug"), 7, "gpu name and slug must be strings"),
    ],
)
def test_a_damaged_record_is_one_clear_error(tmp_path, keys, value, fragment):
    path = _bad(tmp_path, hostile_cases._set(keys, value))
    with pytest.raises(UserError) as exc:
        load_record(path)
    assert str(exc.value).startswith(f"{path}: corrupted results file (") and fragment in str(exc.value)


def test_a_record_with_no_families_and_no_best_loads(tmp_path):
    def empty(data):
        data["families"], data["best"] = {}, None

    assert load_record(_bad(tmp_path, empty))["families"] == {}


def test_atomic_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    (tmp_path / "folder").mkdir()
    with pytest.raises(UserError, match="cannot write"):
        atomic_write_text(tmp_path / "folder", "x")  # onto a folder
    with pytest.raises(UserError, match="cannot write"):
        atomic_write_text(tmp_path / "a" / "b.h", "x")  # no folder is made
    assert not (tmp_path / "a").exists()

    def fail(*_a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(UserError, match="No space left on device"):
        atomic_write_text(tmp_path / "t.h", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


# ---- types -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [128.5, 128.0, True, None, [128]])
def test_config_make_refuses_anything_but_integers_and_names(value):
    with pytest.raises(UserError, match=r"coarse2d: parameter BM must be an integer, got"):
        Config.make("coarse2d", {"BM": value, "BN": 64})


def test_a_name_where_the_family_wants_an_integer_is_refused_by_the_family():
    cfg = Config.make("coarse2d", {"BM": "128", "BN": 64, "BK": 8, "TM": 4, "TN": 4})  # names are values too
    with pytest.raises(UserError, match="BM must be an integer, got '128'"):
        Family.load("coarse2d").resolve(cfg)


def test_config_make_takes_integers_of_any_kind():
    import numpy as np

    cfg = Config.make("coarse2d", {"BM": np.int64(128), "BN": 64})
    assert cfg.params == (("BM", 128), ("BN", 64)) and type(cfg["BM"]) is int


def test_sizes_are_bounded_by_a_c_int():
    assert Problem(2**31 - 1, 1, 1).M == 2**31 - 1
    with pytest.raises(UserError, match="N=2147483648 is more than 2147483647"):
        Problem(1, 2**31, 1)
    with pytest.raises(UserError, match="more than 2147483647"):
        Problem.parse("10000000000")


# ---- work estimates, the count cache, list ----------------------------------------------------


def test_a_dry_run_over_the_threshold_asks_and_yes_goes_ahead(tmp_path, monkeypatch, capsys):
    with pytest.raises(UserError, match=r"compiles 1,000,000 points \(big 1,000,000\): about 27.8 h with 30 parallel"):
        cli_inputs.ask_dry_run({"big": 1_000_000, "small": 0}, None, 30)
    cli_inputs.ask_dry_run({"big": 1_000_000}, 10, 1)  # --sample 10: 30 s, no question
    monkeypatch.setattr(cli_inputs, "ASK_ABOVE_S", 0)
    monkeypatch.chdir(tmp_path)
    args = ["search", "--size", "64", "--family", "tiled", "--dry-run", "--jobs", "1"]
    assert cli.main(args) == 2 and "--sample N, or go ahead with --yes" in capsys.readouterr().err
    assert cli.main([*args, "--yes"]) == 0 and "4/4" in capsys.readouterr().out


def test_a_search_estimate_counts_the_space_and_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))  # no counts known: the spaces' sizes count
    args = cli.build_parser().parse_args(["search", "--size", "4096", "--trials", "100000"])
    spaces = [Space.load("tiled"), Space.load("coarse2d")]
    with pytest.raises(UserError, match=r"up to 3,132 configs"):  # tiled's 7 points + coarse2d's 3,125
        cli_inputs.ask_search(args, spaces, [Problem(4096, 4096, 4096)], 1)
    # fewrows is not meant for 4096^3 (its `suits`), so the search would leave it out: not counted.
    with pytest.raises(UserError, match=r"up to 3,132 configs \(2 families"):
        cli_inputs.ask_search(args, [*spaces, Space.load("fewrows")], [Problem(4096, 4096, 4096)], 1)
    args.timeout = 600
    cli_inputs.ask_search(args, spaces, [Problem(4096, 4096, 4096)], 1)  # bounded by --timeout: no question
    # Each shape's search gets the whole timeout: four shapes of 600 s are 40 minutes.
    with pytest.raises(UserError, match=r"4 shape\(s\)\): about 40 min"):
        cli_inputs.ask_search(args, spaces, [Problem(4096, 4096, 4096 + i) for i in range(4)], 1)
    default = cli.build_parser().parse_args(["search", "--size", "4096"])
    shipped = [Space.load(f) for f in ("tiled", "coarse1d", "coarse2d", "vectorized", "warptile")]
    cli_inputs.ask_search(default, shipped, [Problem(4096, 4096, 4096)], 1)  # never asks, even on one core


def test_list_counts_from_the_cache_and_only_counts_when_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_stored, "known_families", lambda: ["coarse1d", "tiled"])  # warptile's takes long
    calls = []
    enumerate_ = Space.enumerate

    def counting(self, limits):
        calls.append(self.family.name)
        return enumerate_(self, limits)

    monkeypatch.setattr(Space, "enumerate", counting)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert calls == [] and "     ? valid of 625 " in out and "'autotune list --count'" in out
    assert cli.main(["list", "--count"]) == 0
    assert calls == ["coarse1d", "tiled"]
    counted = capsys.readouterr().out
    assert "? valid" not in counted and "   215 valid of 625 " in counted and "     4 valid of 7 " in counted
    calls.clear()
    assert cli.main(["list"]) == 0 and calls == [] and capsys.readouterr().out == counted


def test_the_count_cache_is_keyed_by_space_limits_and_template(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))
    h100, a100 = load_profile("h100"), load_profile("a100")
    sp = Space.load("coarse1d")
    assert counts.cached_valid(sp, h100) is None
    assert counts.count_valid(sp, h100) == 215 == counts.cached_valid(sp, h100)
    assert counts.cached_valid(sp, a100) is None
    smaller = Space(sp.family, {**sp.values, "BM": sp.values["BM"][:1]}, [], "x")
    assert counts.cached_valid(smaller, h100) is None
    edited = Family.load("coarse1d")
    edited.__dict__["fingerprint"] = "edited"
    assert counts.cached_valid(Space(edited, sp.values, [], "x"), h100) is None
    (tmp_path / "counts" / f"{counts.count_key(sp, h100)}.json").write_text('{"valid": "many"}')
    assert counts.cached_valid(sp, h100) is None  # a damaged entry is only a miss


def test_list_and_help_answer_fast():
    for argv in (["list"], ["--help"], ["search", "--help"]):
        best = min(_seconds(argv) for _ in range(3))
        assert best < 3.0, (argv, best)  # < 0.5 s on an idle core; this bound only catches a recount


def _seconds(argv) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "autotune.cli", *argv], cwd=ROOT, capture_output=True)
    assert r.returncode == 0
    return time.perf_counter() - t0


# ---- compile failures ------------------------------------------------------------------------


def test_first_error_puts_errors_first_without_carets():
    from autotune.gpu.compile import _first_error

    log = (
        'k.cu(9): warning #177-D: unused\n  static int x;\n  ^\n\nk.cu(12): error: identifier "foo" is '
        'undefined\n    a = foo;\n        ^\n\nRemark: warnings can be suppressed\n1 error detected in "k.cu".\n'
    )
    assert (
        _first_error(log) == 'k.cu(12): error: identifier "foo" is undefined | k.cu(9): warning #177-D: unused'
        " | static int x;"
    )
    assert _first_error("") == "no log"


def test_a_config_is_read_back_from_its_name():
    fam = Family.load("warptile")
    for seed in Space.load("warptile").seeds:
        assert cli_dry_run.config_from_name(fam, seed.name) == seed
    assert cli_dry_run.config_from_name(fam, "warptile_BM128") is None


def test_search_verbose_prints_the_whole_nvrtc_log(case_folder):
    setup = hostile_cases._family(
        "bad", lambda t: t.replace("__syncthreads();", "__syncthreads(); undefined_thing();", 1)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), **setup(case_folder)}
    table = {f"bad_TILE{t}": "compile_failed" for t in (8, 16, 24, 32)}
    (case_folder / "table.json").write_text(json.dumps({"table": table}))
    cmd = [sys.executable, "-m", "autotune.cli", *"search --size 64 --family bad --replay table.json".split()]
    r = subprocess.run(
        [*cmd, "--quiet", "--verbose"], cwd=case_folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 1, r.stderr  # no config passed: nothing recorded
    assert "bad: compile_failed (e.g. bad_TILE" in r.stdout
    assert "bad: NVRTC log of bad_TILE" in r.stdout and "1 error detected in the compilation of" in r.stdout
    assert not (case_folder / "results" / SLUG / "64x64x64.json").exists()


# ---- input files ------------------------------------------------------------------------------


_READ = """
import resource, sys
from autotune.core.types import UserError
from autotune.core.yamlio import read_text
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # /dev/zero read whole would pass this
try:
    print(repr(read_text(sys.argv[1])))
except UserError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    "name, answer",
    [
        ("fifo", "''"),  # a FIFO nothing writes to reads as empty: no wait for ever
        ("/dev/zero", "/dev/zero: more than 64 MiB, too large for an input file"),
        (".", ".: cannot read (Is a directory)"),
    ],
)
def test_input_files_that_never_end_or_never_come_are_one_error(tmp_path, name, answer):
    os.mkfifo(tmp_path / "fifo")
    r = subprocess.run(
        [sys.executable, "-c", _READ, name], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == answer, r.stderr[-2000:]


# ---- replay tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('{"table": {"tiled_TILE16": NaN}}', "table['tiled_TILE16'] is nan, not a number >= 0.001"),
        ('{"table": {"tiled_TILE16": Infinity}}', "table['tiled_TILE16'] is inf"),
        ('{"table": {"tiled_TILE16": 1e400}}', "table['tiled_TILE16'] is inf"),
        ('{"table": {"tiled_TILE16": true}}', "table['tiled_TILE16'] is True"),
        ('{"table": {"tiled_TILE16": null}}', "table['tiled_TILE16'] is None"),
        ('{"table": {"tiled_TILE16": [900]}}', "table['tiled_TILE16'] is [900]"),
        ('{"table": {"tiled_TILE16": 1e13}}', "is 10000000000000.0, not a number >= 0.001 and at most 1e+12"),
        ('{"table": {"tiled_TILE16": "fast"}}', "table['tiled_TILE16'] is 'fast': a status is one of rejected"),
        ('{"table": {"": 900}}', "table key '' is not a config name"),
        ('{"table": {"../x": 900}}', "table key '../x' is not a config name"),
        ('{"table": {}, "delay_s": 1e300}', "delay_s is 1e+300, not a number >= 0 and at most 3600"),
        ('{"table": {}, "delay_s": -1}', "delay_s is -1"),
        ('{"table": {}, "cublas_gflops": 0}', "cublas_gflops is 0"),
        ('{"table": {}, "cublas_gflops": null}', "cublas_gflops is None"),
        ('{"delay_s": 0}', "no 'table'"),
        ('"table"', "a JSON object with table, cublas_gflops, delay_s expected, got str"),
        ("[" * 100_000, "not a replay table ("),
        ("{", "not a replay table (not JSON: "),
    ],
)
def test_a_replay_table_is_checked_whole_on_load(tmp_path, text, fragment):
    from autotune.search.replay import load_replay

    path = tmp_path / "table.json"
    path.write_text(text)
    with pytest.raises(UserError) as exc:
        load_replay(str(path), load_profile("h100"))
    line = str(exc.value)
    assert line.startswith(f"{path}: ") and fragment in line and "\n" not in line, line


def test_a_valid_replay_table_loads_as_written(tmp_path):
    from autotune.core.types import Status
    from autotune.search.replay import load_replay

    path = tmp_path / "table.json"
    path.write_text('{"table": {"tiled_TILE16": 900, "tiled_TILE8": "incorrect"}, "cublas_gflops": 5e3, "delay_s": 0}')
    ev = load_replay(str(path), load_profile("h100"))
    assert ev.table == {"tiled_TILE16": 900.0, "tiled_TILE8": Status.INCORRECT}
    assert (ev.cublas_gflops, ev.delay_s) == (5000.0, 0.0)


# ---- caches that cannot be used ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "dangling link", "read-only folder"])
def test_an_unusable_cache_only_costs_time(tmp_path, monkeypatch, kind):
    from autotune.gpu.compile import compile_source

    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("")
    elif kind == "dangling link":
        cache.symlink_to(tmp_path / "nowhere")
    else:
        cache.mkdir()
        cache.chmod(0o555)
        if os.access(cache, os.W_OK):
            pytest.skip("root writes into read-only folders")
    monkeypatch.setenv("AUTOTUNE_CACHE", str(cache))
    sp = Space.load("tiled")
    assert counts.count_valid(sp, load_profile("h100")) == 4
    assert counts.cached_valid(sp, load_profile("h100")) is None  # nothing stored, nothing read
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }'
    first = compile_source(src, "sm_90", "k")
    assert not first.cached and not compile_source(src, "sm_90", "k").cached
    assert not (tmp_path / "nowhere").exists()
    assert [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")] == []


def test_a_cache_write_that_fails_half_way_leaves_no_temporary_file(tmp_path, monkeypatch):
    from autotune.core import cachedir

    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))

    def full(*_a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    assert cachedir.write_atomic(cachedir.cache_folder("counts") / "x.json", b"{}") is False
    assert list((tmp_path / "counts").iterdir()) == []


def test_a_cache_file_gets_the_mode_the_umask_gives(tmp_path, monkeypatch):
    """As any file written: a cache folder may be shared by a team (mkstemp would make it 0600)."""
    from autotune.core import cachedir

    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path))
    old = os.umask(0o022)
    try:
        assert cachedir.write_atomic(cachedir.cache_folder("counts") / "x.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "counts" / "x.json").stat().st_mode & 0o777 == 0o644


def test_no_home_folder_means_no_cache(monkeypatch):
    from autotune.core import cachedir

    for var in ("AUTOTUNE_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)

    def nowhere(*_a):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", nowhere)
    assert cachedir.cache_root() is None and counts.cached_valid(Space.load("tiled"), load_profile("h100")) is None
    counts.store_valid(Space.load("tiled"), load_profile("h100"), 4)  # skipped, not an error


# ---- options that are numbers -----------------------------------------------------------------


def _number_options():
    """(command, option) for every option of every command whose type takes a fraction."""
    parser = cli.build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    out = []
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if action.type is None or not action.option_strings or action.type is Path:
                continue
            try:
                action.type("0.5")
            except Exception:  # noqa: BLE001 - an integer option, or a name: not a fraction
                continue
            out.append((name, action.option_strings[-1]))
    return out


def test_every_number_option_is_walked():
    found = set(_number_options())
    assert {("search", "--timeout"), ("search", "--beta"), ("check", "--tolerance")} <= found


@pytest.mark.parametrize("command, option", _number_options())
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999", "-1e999", "", "x"])
def test_no_number_option_takes_a_value_that_is_not_finite(command, option, value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args([command, f"{option}={value}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(f"autotune: error: argument {option}: expected "), err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--size", "64", "--seed", str(2**32)],
        ["search", "--size", "64", "--device", str(2**31)],
        ["search", "--size", "64", "--workers", "65"],
        ["check", "--device", "-1"],
        ["check", "--tolerance", "1"],
        ["search", "--size", "64", "--candidate-timeout", "0"],
        ["search", "--size", "64", "--timeout", "1e10"],
    ],
)
def test_options_outside_their_range_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(argv)
    assert exc.value.code == 2 and "expected" in capsys.readouterr().err


# ---- standard output that cannot be written -----------------------------------------------------


class _Broken:
    def __init__(self, exc):
        self.exc, self.encoding = exc, "utf-8"

    def write(self, text):
        raise self.exc

    def flush(self):
        pass


@pytest.mark.parametrize(
    "exc, reason",
    [
        (BrokenPipeError(32, "Broken pipe"), "Broken pipe"),
        (OSError(28, "No space left on device"), "No space left on device"),
        (OSError(9, "Bad file descriptor"), "Bad file descriptor"),
    ],
)
@pytest.mark.parametrize("argv", [["list"], ["--help"], ["--version"], ["search", "--size", "64", "--help"]])
def test_stdout_that_cannot_be_written_is_one_line_for_every_command(monkeypatch, capsys, exc, reason, argv):
    broken = _Broken(exc)
    monkeypatch.setattr(sys, "stdout", broken)
    try:
        code = cli.main(argv)
    except SystemExit as stop:  # --help and --version exit through argparse, after their output
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and err == f"autotune: error: cannot write to standard output ({reason})\n", err
    assert sys.stdout is broken  # put back as it was


def test_with_stderr_closed_an_error_is_the_exit_code_alone(tmp_path):
    """Not a line on stdout instead (print to a closed stderr writes to stdout)."""
    (tmp_path / "f.txt").write_text("")
    r = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "list", "--results", "f.txt"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),
        timeout=120,
    )
    assert r.returncode == 2 and b"error" not in r.stdout, r.stdout[-500:]


def test_a_file_name_that_is_not_utf8_is_printed_escaped(tmp_path, monkeypatch, capsys):
    record(tmp_path)
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"t\xff.h")  # an undecodable byte, as a file name may hold
    assert cli.main(["export", "--size", "64", "-o", name]) == 0
    assert "wrote t\\udcff.h: tiled_TILE32" in capsys.readouterr().out
    # In the header every character outside printable ASCII is written %XX (export.c_text).
    assert (tmp_path / os.fsdecode(b"t\xff.h")).read_text().startswith("// t%3F.h: generated by autotune")


def test_an_output_name_cannot_put_code_into_the_header(tmp_path, monkeypatch, capsys):
    """The header names its file in comments: a newline in -o would end the comment, and what
    follows it would be code."""
    record(tmp_path)
    monkeypatch.chdir(tmp_path)
    name = "x\n#define float double\n.h"
    assert cli.main(["export", "--size", "64", "-o", name]) == 0
    text = (tmp_path / name).read_text()
    assert "#define float" not in "\n".join(ln for ln in text.splitlines() if not ln.startswith("//"))
    assert "// x%0A#define float double%0A.h: generated by autotune" in text


def test_a_control_character_in_an_error_stays_on_its_line(capsys):
    assert cli.main(["search", "--size", "64", "--family", "tiled", "--replay", "a\nb\rc"]) == 2
    assert capsys.readouterr().err == "autotune: error: a\\nb\\rc: cannot read (No such file or directory)\n"


# ---- the Python API without a GPU ---------------------------------------------------------------


def _no_usable_gpu() -> bool:
    """CuPy is installed and CUDA has no device for it (no GPU, no driver): the case to test."""
    try:
        from cupy_backends.cuda.api import runtime
    except Exception:  # noqa: BLE001 - no CuPy: the API cannot be reached at all
        return False
    try:
        return runtime.getDeviceCount() == 0
    except runtime.CUDARuntimeError:
        return True


class _ForeignArray:
    """What a GPU array of another library offers: a CUDA array interface (here pointing nowhere)."""

    def __init__(self, rows, cols):
        self.__cuda_array_interface__ = {
            "shape": (rows, cols),
            "typestr": "<f4",
            "data": (0x7F0000000000, False),
            "version": 3,
            "strides": None,
        }


@pytest.mark.skipif(not _no_usable_gpu(), reason="needs CuPy on a machine without a usable CUDA device")
@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.load(),
        lambda a: a.load("64x64x64"),
        lambda a: a.load(config={"family": "tiled", "params": {"TILE": 16}}),
        lambda a: a.matmul(_ForeignArray(4, 4), _ForeignArray(4, 4)),
    ],
)
def test_the_python_api_without_a_gpu_says_so(call):
    import autotune

    with pytest.raises(autotune.NoGPUError) as exc:
        call(autotune)
    assert str(exc.value).startswith("no CUDA GPU: ") and "\n" not in str(exc.value)
    assert isinstance(exc.value, RuntimeError) and isinstance(exc.value, UserError)
