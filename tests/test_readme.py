"""README.md is a user's manual: short, every command it shows is one today's command line takes,
every file it links exists, and it cites no device runs (they live in benchmarks/logs/INDEX.md)."""

import os
import re
import shlex
from pathlib import Path

import pytest

from autotune.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "templates/README.md")


def _commands(text: str) -> list[str]:
    """The autotune command lines of a page: its indented code lines (after any `&&`, before a
    `#` comment) and its inline code spans that start with `autotune `."""
    found = []
    for line in text.splitlines():
        if line.startswith("    "):
            for part in line.split("&&"):
                part = part.split(" #")[0].strip()
                if part.startswith("autotune "):
                    found.append(part)
    found += re.findall(r"`(autotune [^`]+)`", text)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_command_shown_is_taken_by_the_command_line(page):
    commands = _commands((ROOT / page).read_text())
    assert commands or page != "README.md"
    parser = build_parser()
    for command in commands:
        argv = shlex.split(command.replace("...", "x"))[1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # argparse's way to refuse a command line
            raise AssertionError(f"{page}: {command!r} is refused by today's command line") from exc


def test_the_readme_is_short_and_cites_no_device_runs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert not re.findall(r"\bruns? \d+", text, re.IGNORECASE)


@pytest.mark.parametrize("page", (*PAGES, "results/README.md"))
def test_every_file_a_page_links_exists(page):
    path = ROOT / page
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", path.read_text()):
        if "://" not in target:
            assert (path.parent / target).exists(), f"{page} links {target}, which does not exist"


def _record_cost(path: Path) -> tuple:
    """A record's families and shape, to pick one that `check --static` compiles fast."""
    import json

    data = json.loads(path.read_text())
    p = data["problem"]
    return len(data["families"]), p["M"] * p["N"] * p["K"], path.name


def test_the_commands_shown_that_need_no_gpu_work_as_written_without_one(tmp_path):
    """The README's and the example's export, check --static and report lines run as written where
    ./results holds the checkout's GPU folders (several) and no GPU is visible; `autotune check`
    says that it needs a GPU. The exports run on the records they read, check and report on one
    cheap record a folder (check --static compiles every config of its folder)."""
    from helpers import run_cli

    from autotune.cli.inputs import parse_problem
    from autotune.kernels.limits import gpu_slug

    # Code lines and inline commands, but those with a placeholder (--gpu NAME) for the reader
    shown = [c for c in _commands((ROOT / "README.md").read_text()) if "NAME" not in c]
    shown += [line[2:].strip() for line in (ROOT / "examples" / "sgemm_check.cu").read_text().splitlines()[:8]]
    runs = [c for c in shown if c.split()[:2] in (["autotune", "export"], ["autotune", "report"])]
    runs += [c for c in shown if c.startswith("autotune check --static")]
    assert {c.split()[1] for c in runs} == {"export", "check", "report"}, shown
    folders = sorted(p for p in (ROOT / "results").iterdir() if p.is_dir())
    assert len(folders) > 1  # what made a command without --gpu fail
    parser = build_parser()
    for folder in folders:
        keep = {"checks": {min(folder.glob("*.json"), key=_record_cost).name}, "exports": set()}
        for command in runs:
            args = parser.parse_args(shlex.split(command)[1:])
            if args.command == "export" and (args.gpu is None or gpu_slug(args.gpu) == folder.name):
                if args.size or args.m:
                    keep["exports"].add(parse_problem(args).name + ".json")
                else:  # the dispatching header of the folder: a few of its records keep the test short
                    keep["exports"] |= {p.name for p in sorted(folder.glob("*.json"), key=_record_cost)[:4]}
        for where, names in keep.items():
            (tmp_path / where / "results" / folder.name).mkdir(parents=True)
            for name in names & {p.name for p in folder.iterdir()}:
                (tmp_path / where / "results" / folder.name / name).write_bytes((folder / name).read_bytes())
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for command in runs:
        where = tmp_path / ("exports" if command.split()[1] == "export" else "checks")
        # ./results alone, as the folder a user names: by default the shipped records are read
        # beside it (every shape of the checkout's folder), and the few kept above would not keep
        # the dispatching header's export short (a minute of this test on two cores).
        only = {**env, "AUTOTUNE_RESULTS": str(where / "results")}
        r = run_cli(*shlex.split(command)[1:], cwd=where, env=only, timeout=120)
        assert r.returncode == 0, (command, r.stdout, r.stderr)
    r = run_cli("check", cwd=tmp_path / "checks", env=env, timeout=120)
    assert r.returncode == 2 and "no usable GPU" in r.stderr, r.stderr
