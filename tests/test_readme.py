"""README.md is a user's manual: short, every command it shows is one today's command line takes,
every file it links exists, and it cites no device runs (they live in benchmarks/logs/INDEX.md)."""

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
