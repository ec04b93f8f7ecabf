"""The wheel carries the templates, configs and shipped results: installed outside the checkout, it lists the
families and compiles them like the checkout does."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from autotune.records.results import load_record

ROOT = Path(__file__).resolve().parent.parent
# What the build reads; copied so the build never sees a stale build/ folder of the checkout
# (setuptools copies into build/lib without removing what is gone from the source).
BUILD_INPUTS = ("pyproject.toml", "README.md", "autotune", "templates", "configs", "results")


def _run(cmd, cwd, env=None, timeout=300):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.db*"))
        else:
            shutil.copy2(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)], cwd=src)
    (whl,) = dist.glob("autotune-*.whl")
    return whl


def test_wheel_holds_every_template_config_and_profile(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, pattern, inside in (
        ("templates", "*.j2", "autotune/templates"),
        ("configs", "*.yaml", "autotune/configs"),
        ("autotune/profiles", "*.yaml", "autotune/profiles"),
        ("results", "*/*.json", "autotune/results"),
    ):
        expected = {f"{inside}/{p.relative_to(ROOT / folder)}" for p in (ROOT / folder).glob(pattern)}
        assert expected and expected <= names, expected - names
    assert "autotune/py.typed" in names and "autotune/pytorch/native.cpp" in names  # built where it runs
    # Nothing but the package at the top level (no results/, no stray folders in site-packages).
    assert {n.split("/")[0] for n in names} == {"autotune", "autotune-0.1.0.dist-info"}


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv outside the checkout holding the wheel. Its dependencies are this test
    venv's, to install nothing from an index: a path line in a .pth (which, unlike
    `site.addsitedir`, runs no .pth of theirs, so not the checkout's editable finder), and a
    link to the NVIDIA wheels' folder, which cuda-pathfinder looks for in site-packages only."""
    env_dir = tmp_path_factory.mktemp("wheel-venv")
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=env_dir).strip())
    deps = Path(sysconfig.get_paths()["purelib"])
    (site / "test-deps.pth").write_text(f"{deps}\n")
    if (deps / "nvidia").is_dir():
        (site / "nvidia").symlink_to(deps / "nvidia", target_is_directory=True)
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)], cwd=env_dir)
    return env_dir


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOTUNE_TEMPLATES", "AUTOTUNE_RESULTS")}
    env["AUTOTUNE_CACHE"] = str(tmp_path / "cache")
    return env


def test_installed_wheel_finds_its_own_templates_and_configs(installed, tmp_path):
    code = (
        "import json, autotune, autotune.kernels.family as s; print(json.dumps([autotune.__file__, str(s.TEMPLATE_DIR),"
        " str(s.CONFIG_DIR), s.known_families()]))"
    )
    where, templates, configs, families = json.loads(
        _run([str(installed / "bin" / "python"), "-c", code], cwd=tmp_path, env=_env(tmp_path))
    )
    pkg = Path(where).parent
    assert pkg.is_relative_to(installed) and not pkg.is_relative_to(ROOT)
    assert Path(templates) == pkg / "templates" and Path(configs) == pkg / "configs"
    assert families == sorted(p.name.removesuffix(".cu.j2") for p in (ROOT / "templates").glob("[!_]*.cu.j2"))


def test_installed_wheel_lists_and_compiles_outside_the_checkout(installed, tmp_path):
    exe, env = str(installed / "bin" / "autotune"), _env(tmp_path)
    listing = _run([exe, "list", "--results", str(tmp_path / "none")], cwd=tmp_path, env=env)
    listed = {line.split()[0] for line in listing.splitlines() if line[:1].isalpha()}
    assert {"tiled", "coarse1d", "coarse2d", "vectorized", "warptile"} <= listed, listing
    out = _run(
        [exe, "search", "--size", "256", "--family", "tiled", "--dry-run", "--arch", "sm_90"], cwd=tmp_path, env=env
    )
    row = next(line.split() for line in out.splitlines() if line.startswith("tiled "))
    # family, points, static ok, compiled, res. ok: every statically valid point compiled.
    assert int(row[2]) > 0 and row[3] == f"{row[2]}/{row[2]}" and int(row[4]) > 0, out
    assert not (tmp_path / "results").exists()  # a dry run writes nothing


def test_installed_wheel_searches_and_exports_into_the_results_folder_it_is_given(installed, tmp_path):
    exe, env = str(installed / "bin" / "autotune"), _env(tmp_path)
    table = tmp_path / "replay.json"
    # tiled has 4 valid points: 4 trials measure them all, so TILE=16 is the stored best.
    table.write_text(
        json.dumps(
            {"table": {"tiled_TILE8": 500.0, "tiled_TILE16": 900.0, "tiled_TILE24": 600.0, "tiled_TILE32": 700.0}}
        )
    )
    res = tmp_path / "res"
    _run(
        [
            exe,
            "search",
            "--size",
            "64",
            "--family",
            "tiled",
            "--trials",
            "4",
            "--replay",
            str(table),
            "--results",
            str(res),
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
    )
    (record,) = res.glob("*/64x64x64.json")
    assert load_record(record)["families"]["tiled"]["config"]["name"] == "tiled_TILE16"
    header = tmp_path / "tuned.h"
    _run([exe, "export", "--size", "64", "--results", str(res), "-o", str(header)], cwd=tmp_path, env=env)
    text = header.read_text()
    assert "tiled_TILE16" in text and "__global__" in text
    # Nothing was written into the installed package or beside it.
    site = next(installed.glob("lib/python*/site-packages"))
    assert not (site / "results").exists()
    shipped = {p.relative_to(ROOT / "results") for p in (ROOT / "results").glob("*/*.json")}
    inside = site / "autotune" / "results"
    assert {p.relative_to(inside) for p in inside.rglob("*.*")} == shipped


def test_installed_wheel_reads_its_shipped_results_beside_the_users(installed, tmp_path):
    # matmul's table for a GPU the wheel ships results of: those records, with no ./results here,
    # and with a ./results of another GPU beside them.
    code = (
        "from autotune.dispatch.table import table_for; "
        "print(sorted(p.name for p, _ in table_for(None, 'nvidia-h200').records))"
    )
    want = sorted(p.stem for p in (ROOT / "results" / "nvidia-h200").glob("*.json"))
    py, env = str(installed / "bin" / "python"), _env(tmp_path)
    assert want and _run([py, "-c", code], cwd=tmp_path, env=env).strip() == str(want)
    (tmp_path / "results" / "some-other-gpu").mkdir(parents=True)
    assert _run([py, "-c", code], cwd=tmp_path, env=env).strip() == str(want)
