"""The command line: bad input is one clear line and exit 2; --dry-run works without a GPU."""

import json
import os
import random
import re
import subprocess
import sys

import pytest
from helpers import RESULTS, ROOT
from helpers import one_clear_line as _one_clear_line
from helpers import run_cli as run

from autotune.kernels.limits import load_profile
from autotune.kernels.space import Space

NO_DEVICE = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # a GPU machine looks like one without


def _replay(tmp_path, family):
    """A replay table of the family's valid points on the H100 (distinct GFLOP/s each): its path, its table."""
    valid = Space.load(family).enumerate(load_profile("h100")).valid
    table = {c.name: 1000.0 + i for i, c in enumerate(valid)}
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"table": table, "cublas_gflops": 20000}))
    return path, table


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["search", "--size", "0"], "--size: expected a positive integer, got 0"),
        (["search", "--size", "-3"], "--size: expected a positive integer, got -3"),
        (["search", "--size", "abc"], "expected a positive integer, got 'abc'"),
        (["search", "--m", "10", "--n", "10"], "give --size S, or all of --m, --n and --k"),
        (["search", "--size", "8", "--m", "8", "--n", "8", "--k", "8"], "not both"),
        (["search", "--size", "64", "--family", "nope"], "unknown family 'nope'"),
        (["search", "--size", "64", "--family", "../etc"], "family '../etc'"),
        (["search", "--size", "64", "--sampler", "cmaes"], "invalid choice: 'cmaes'"),
        (["search", "--size", "64", "--timeout", "-1"], "expected a number >= 0"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["export", "--size", "64", "--results", "/nonexistent"], "no results under /nonexistent"),
        (["check", "--results", str(RESULTS), "--gpu", "Some GPU"], "no results for GPU 'Some GPU'"),
    ],
)
def test_bad_arguments(args, fragment):
    assert fragment in _one_clear_line(run(*args))


@pytest.mark.parametrize(
    "doc, fragment",
    [
        ("space: {TILE: [8, 16\n", "malformed YAML"),
        ("space: {TILE: [8], SIZE: [2]}\n", "unknown parameter 'SIZE'"),
        ("space: {TILE: ['16; asm(\"trap;\")']}\n", "TILE must be an integer"),
        ("space: {TILE: [100]}\n", "TILE=100 is outside its domain [1, 64]"),
        ("space: {TILE: [4, 48, 64]}\n", "no valid point among 3"),
    ],
)
def test_bad_config_files(tmp_path, doc, fragment):
    cfg = tmp_path / "space.yaml"
    cfg.write_text(doc)
    line = _one_clear_line(run("search", "--size", "64", "--family", "tiled", "--config", str(cfg), "--dry-run"))
    assert fragment in line


def test_dry_run_filters_and_compiles_without_a_gpu(tmp_path):
    r = run(*"search --size 4096 --family tiled coarse2d --dry-run --arch sm_90 --sample 6".split(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "tiled" in out and "coarse2d" in out and "3125" in out and "1593" in out
    assert "threads per block <= device limit (2)" in out  # tiled: 48 and 64 exceed 1024 threads
    assert "6/6" in out
    assert not (tmp_path / "results").exists()  # a dry run writes no results


def test_search_without_a_gpu_says_so(tmp_path):
    code = (
        "import cupy\ntry:\n    print(cupy.cuda.runtime.getDeviceCount())\n"
        "except cupy.cuda.runtime.CUDARuntimeError:\n    print(0)"
    )
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=NO_DEVICE, timeout=120)
    assert seen.stdout.strip() == "0", seen.stdout + seen.stderr  # no device visible, GPU machine or not
    r = run(
        *"search --size 64 --family tiled --results".split(), str(tmp_path), cwd=tmp_path, timeout=300, env=NO_DEVICE
    )
    line = _one_clear_line(r)
    assert "no usable GPU" in line and "--dry-run" in line
    assert not any(tmp_path.iterdir())  # nothing half-written


@pytest.mark.parametrize("sub", ["search", "export", "check", "list"])
def test_help(sub):
    r = run(sub, "--help")
    assert r.returncode == 0 and "usage: autotune " + sub in r.stdout


def test_python_dash_m_autotune_is_the_command():
    """`python -m autotune` where the scripts folder is not on PATH: the same parser and exit codes."""
    r = subprocess.run([sys.executable, "-m", "autotune", "search", "--size", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("autotune: error: argument --size")
    r = subprocess.run([sys.executable, "-m", "autotune", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("autotune ")


def test_list_shows_families_and_results():
    r = run("list", "--results", str(RESULTS))
    assert r.returncode == 0, r.stderr
    assert "warptile" in r.stdout and "nvidia-h100-80gb-hbm3  4096x4096x4096" in r.stdout
    assert "nvidia-h200  4097x4097x4097" in r.stdout


def test_check_static_on_stored_results():
    r = run("check", "--static", "--gpu", "nvidia-h200", "--results", str(RESULTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed (static)" in r.stdout


def test_export_cli_writes_a_header(tmp_path):
    r = run("export", "--size", "4096", "--gpu", "nvidia-h200", "--results", str(RESULTS), "-o", str(tmp_path / "t.h"))
    assert r.returncode == 0, r.stderr
    assert '#define AUTOTUNE_FAMILY "warptile"' in (tmp_path / "t.h").read_text()


def test_import_does_not_import_cupy():
    code = "import sys, autotune, autotune.cli, autotune.search.driver; print('cupy' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip() == "False", r.stderr


def test_report_writes_plots_and_markdown(tmp_path):
    # Studies and results of two families, from a replayed search (no GPU): coarse1d the faster.
    h100 = load_profile("h100")
    rng = random.Random(0)
    table = {
        c.name: round(rng.uniform(lo, lo + 5000), 1)
        for fam, lo in (("tiled", 1000), ("coarse1d", 8000))
        for c in Space.load(fam).enumerate(h100).valid
    }
    replay = tmp_path / "table.json"
    replay.write_text(json.dumps({"table": table, "cublas_gflops": 20000}))
    results, out = tmp_path / "results", tmp_path / "report"
    r = run(*"search --size 512 --family tiled coarse1d --trials 12 --replay".split(), str(replay),
            "--results", str(results), "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = run("report", "--results", str(results), "-o", str(out))
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "## highest: FP32 on the CUDA cores, against cuBLAS FP32 (SGEMM)" in md
    assert "| 512x512x512 | coarse1d |" in md and "`optuna-dashboard sqlite:///" in md
    pngs = {p.name for p in out.glob("*.png")}
    want = {"shapes_highest.png", "families_highest.png", "trials_512x512x512.png"}
    assert want | {"importance_coarse1d_512x512x512.png"} <= pngs
    # Best so far against trials and wall time: a figure for the shape, a row for each study, each
    # with its 12 trials and its best (the replay's table) against the replayed cuBLAS.
    assert "progress_512x512x512.png" in pngs
    study_row = re.compile(r"^\| 512x512x512 \| (coarse1d|tiled) [0-9a-f]{10} \|")
    rows = sorted(line.split(" | ") for line in md.splitlines() if study_row.match(line))
    assert len(rows) == 2 and all(int(r[2]) >= 12 for r in rows)  # 12 measured, and any rejected
    best = max(v for name, v in table.items() if name.startswith("coarse1d"))
    coarse = rows[0]
    assert float(coarse[4]) <= best / 1e3 + 0.05 and coarse[5] == f"{float(coarse[4]) * 1e3 / 20000:.2f}x"
    for name in pngs:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--sizes", "1024,abc"], "--sizes: shape 'abc': not an integer"),
        (["--sizes", "1024", "--size", "8"], "give one of --size, --m/--n/--k, --sizes, --shapes-file or --table"),
        (["--sizes", "0x5x5"], "--sizes: M must be a positive integer"),
        (["--shapes-file", "/nonexistent/shapes.txt"], "/nonexistent/shapes.txt: cannot read"),
    ],
)
def test_several_shapes_bad_input(args, fragment):
    assert fragment in _one_clear_line(run("search", *args, "--family", "tiled", "--dry-run"))


def test_several_shapes_dry_run(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("# shapes to tune\n512\n1000x1000x64\n")
    r = run("search", "--shapes-file", str(shapes), "--family", "tiled", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "dry run: 512x512x512" in r.stdout and "dry run: 1000x1000x64" in r.stdout


def test_search_table_is_the_representative_grid(tmp_path):
    """--table tunes every shape of cli_inputs.TABLE_SHAPES (here a dry run of one family), in
    the layout asked for; with another shape option it is an error."""
    from autotune.cli.inputs import TABLE_SHAPES
    from autotune.core.types import Problem

    r = run("search", "--table", "--layout", "nt", "--family", "tiled", "--dry-run", "--sample", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    runs = [ln.split()[2].rstrip(",") for ln in r.stdout.splitlines() if ln.startswith("dry run:")]
    assert runs == [Problem.parse(s, "nt").name for s in TABLE_SHAPES]
    line = _one_clear_line(run("search", "--table", "--size", "64", "--dry-run", cwd=tmp_path))
    assert "give one of --size, --m/--n/--k, --sizes, --shapes-file or --table" in line


def test_export_layouts_bad_input(tmp_path):
    for args, msg in [
        (["--layouts", "nn,xy"], "--layouts 'nn,xy': a comma list of nn, nt, tn, tt (or 'all')"),
        (["--layouts", "nn,nt", "--layout", "tt"], "give --layout or --layouts, not both"),
    ]:
        line = _one_clear_line(run("export", "--size", "64", *args, "--results", str(tmp_path), cwd=tmp_path))
        assert msg in line, line


def test_search_times_cublas_while_it_makes_the_first_plan(tmp_path, monkeypatch):
    """The baseline runs on its own thread while the first plan is made and its first window
    handed to the evaluator: here the baseline waits for that hand-over, which a search that
    timed cuBLAS first would never reach."""
    import threading

    from autotune import cli
    from autotune.search import replay

    path, _ = _replay(tmp_path, "coarse1d")
    handed = threading.Event()
    plain = replay.ReplayEvaluator.baseline

    def baseline(self, problem):
        assert handed.wait(60), "cuBLAS was timed before the plan was made"
        return plain(self, problem)

    monkeypatch.setattr(replay.ReplayEvaluator, "baseline", baseline)
    monkeypatch.setattr(replay.ReplayEvaluator, "prefetch", lambda self, configs, problem: handed.set())
    args = ["search", "--size", "512", "--family", "coarse1d", "--trials", "6", "--replay", str(path)]
    assert cli.main([*args, "--results", str(tmp_path / "r"), "--quiet", "--yes"]) == 0
    stored = json.loads(next((tmp_path / "r").glob("*/512x512x512.json")).read_text())
    assert stored["families"]["coarse1d"]["gflops"] > 1000


def test_the_default_window_is_a_trial_a_compile_thread_within_an_eighth_of_the_budget():
    from autotune.search.evaluate import default_window

    got = [default_window(j, t) for j, t in ((12, 128), (16, 100), (16, 30), (2, 128), (16, 1000))]
    assert got == [12, 12, 8, 8, 16]


@pytest.mark.parametrize(
    ("extra", "window"),
    # 72 trials for a window of 9 (about 15 s) under -m slow; --window 5 in the default run.
    [pytest.param(["--jobs", "9", "--trials", "72"], 9, marks=pytest.mark.slow), (["--window", "5"], 5)],
)
def test_a_search_keeps_a_trial_in_flight_for_each_compile_thread(tmp_path, monkeypatch, extra, window):
    """--window's default: a trial a compile thread (--jobs), at most an eighth of the budget
    (each in flight is a result TPE's next ask lacks), at least 8."""
    from autotune import cli
    from autotune.search import driver as search

    path, _ = _replay(tmp_path, "coarse1d")
    seen = []
    plain = search.plan_search
    monkeypatch.setattr(search, "plan_search", lambda *a, **kw: seen.append(kw["batch"]) or plain(*a, **kw))
    args = ["search", "--size", "512", "--family", "coarse1d", "--replay", str(path), *extra]
    assert cli.main([*args, "--results", str(tmp_path / "r"), "--quiet", "--yes"]) == 0
    assert seen == [window]


class _Clock:
    """A clock that moves only when a candidate is measured: what a search does in its time then
    depends on its logic alone, not on how fast this machine runs it."""

    def __init__(self, step: float):
        self.now, self.step = 1000.0, step

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.slow  # searches until its timeout: 40 s on two cores (CI's slow step)
def test_a_timeout_alone_makes_the_time_the_budget(tmp_path, monkeypatch, capsys):
    """`search --timeout SEC` without --trials measures as many configs as the time allows (it
    stopped at the default 30 before), and its record says the trials were not bounded. Each
    measurement takes 0.05 s of a fake clock: 4 s allow 80, then the trials already in flight."""
    from autotune import cli
    from autotune.cli import search as cli_search
    from autotune.cli.inputs import DEFAULT_TRIALS
    from autotune.search import driver as search
    from autotune.search import progress, replay, trials

    path, table = _replay(tmp_path, "coarse2d")
    clock = _Clock(0.05)
    for module in (cli_search, search, trials, progress):
        monkeypatch.setattr(module, "time", clock)
    measured, plain = [], replay.ReplayEvaluator.evaluate

    def evaluate(self, configs, problem, retime=False):
        if not retime:
            measured.extend(c.name for c in configs)
            clock.now += clock.step * len(configs)
        return plain(self, configs, problem, retime)

    monkeypatch.setattr(replay.ReplayEvaluator, "evaluate", evaluate)
    results = tmp_path / "r"
    args = ["search", "--size", "512", "--family", "coarse2d", "--replay", str(path), "--timeout", "4"]
    assert cli.main([*args, "--results", str(results), "--window", "8", "--yes"]) == 0
    out, err = capsys.readouterr()
    assert "1 families, until 4 s" in out
    # The progress lines count trials alone and follow the clock, not a budget of the whole space.
    assert f"/{len(table)}" not in err and "coarse2d" in err
    entry = json.loads(next(results.glob("*/512x512x512.json")).read_text())["families"]["coarse2d"]
    # Time ended it: 80 measurements fit in 4 s, then at most a window of 8 already asked; far
    # fewer than the valid points (the budget it would otherwise have had) and more than the
    # default trial count (which a timeout alone does not impose).
    assert len(measured) == len(set(measured)) == entry["search"]["evaluated"]
    assert 4 / clock.step <= len(measured) <= 4 / clock.step + 8
    assert DEFAULT_TRIALS < len(measured) < len(table)
    assert entry["search"]["trials"] is None
    # The record names the source it measured (check --static tells compiler from template by it).
    from autotune.kernels.render import source_digest
    from autotune.records.results import entry_config

    resolved = Space.load("coarse2d").family.resolve(entry_config(entry))
    assert entry["source"] == source_digest(resolved)
    # ... and the machine code it compiled to (check --static keys the record on that).
    from autotune.search.evaluate import code_of

    assert entry["code"] == code_of(resolved, entry["limits"]["arch"]) and len(entry["code"]) == 16


def test_the_fault_fixture_family_loads_beside_the_shipped_ones():
    # tests/device/test_faults.py searches this family on a GPU: a declaration it lacks (as its
    # YAML's model: section once did) would fail there only, so its dry run is checked here.
    env = dict(os.environ, AUTOTUNE_TEMPLATES=str(ROOT / "tests" / "data" / "broken"))
    r = run("search", "--size", "300", "--family", "broken", "tiled", "--dry-run", "--arch", "sm_90", env=env)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^broken\s+9\s+9\s+9/9\s+9", r.stdout, re.M), r.stdout
