"""Input of any length: masking credentials takes time linear in the text (it once took minutes on
a 130,000-letter argument and hours on a megabyte line of a shapes file), and an error line
quotes at most a few hundred characters of a user's value, however long the value."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from autotune.core import redact
from autotune.core.types import LINE_CHARS, QUOTE_CHARS, Config, Problem, UserError, error_line
from autotune.kernels.family import Family

MB = 1_000_000
# Text that made the masking scan the rest of the text from each position: a long word (each
# letter could start a URL's scheme), and many URL user parts with no '@' after them.
SLOW_BEFORE = {
    "letters": "a" * MB,
    "user parts without a password": "-a://b:" * (MB // 7),
    "schemes": "a://" * (MB // 4),
    "a word and its '@' far apart": "@" + "x.y://u:" * (MB // 8),
}
HANG_GUARD_S = 60  # a hang detector: the quadratic masking took hours on each of these


def _run(args: list[str], cwd, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)}, input=stdin,
        capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip


_MASK_ALL = """
import sys
from autotune.core import redact
for text in sys.stdin.read().split("\\0"):
    redact.url(text), redact.text(text), redact.secrets(text)
print("done")
"""


def test_masking_megabytes_of_hostile_text_ends(tmp_path):
    r = _run(["-c", _MASK_ALL], tmp_path, stdin="\0".join(SLOW_BEFORE.values()))
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr[-2000:]


@pytest.mark.parametrize("before", ["", "a" * 5000, "-a://b:" * 500, "x.y://u:" * 500 + " "])
def test_a_password_is_masked_after_any_text(before):
    url = "postgresql://user:s3cret@db/x"
    assert redact.text(f"{before}'{url}' and {before}") == f"{before}'postgresql://user:***@db/x' and {before}"
    assert "s3cret" not in redact.url(before + url) and redact.url(before + url).endswith(":***@db/x")


@pytest.mark.parametrize("kind", ["digits", "user parts", "words"])
def test_a_megabyte_line_in_a_shapes_file_is_one_short_line(tmp_path, kind):
    line = {"digits": "1" * MB, "user parts": "-a://b:" * (MB // 7), "words": "1 " * (MB // 2)}[kind]
    (tmp_path / "shapes.txt").write_text(line + "\n")
    r = _run(["-m", "autotune.cli", "search", "--shapes-file", "shapes.txt", "--dry-run"], tmp_path)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith("autotune: error: shapes.txt: shape '") and "..." in lines[0]
    assert lines[0].endswith(": not an integer") and len(lines[0]) < 2 * QUOTE_CHARS + 200, lines[0]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--size", "64", "--family", "a" * 130_000], "names are lower-case letters, digits and '_', at most 64"),
        (["--size", "64", "--layout", "n" * 130_000], "invalid choice"),
        (["--sizes", "x" * 130_000], "expected N or MxNxK"),
        (["--size", "64", "stray://u:pw@" + "h" * 130_000], "unrecognized arguments: stray://u:***@hhh"),
    ],
)
def test_a_huge_argument_is_one_short_line(tmp_path, args, fragment):
    r = _run(["-m", "autotune.cli", "search", "--dry-run", *args], tmp_path)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert fragment in lines[0] and "..." in lines[0] and len(lines[0]) < 2 * QUOTE_CHARS + 200, lines[0]
    assert "pw" not in lines[0]


def test_an_error_line_clips_each_long_value_and_itself():
    word = "s" + "x" * 10_000 + "e"
    line = error_line(f"file {word}: cannot read")
    clipped = line.split()[1]
    assert len(clipped) == QUOTE_CHARS and clipped.startswith("sxx") and clipped.endswith("xe:")
    assert "..." in clipped and line.endswith(": cannot read")
    many = error_line("shape '" + "1 " * 10_000 + "': not an integer")
    assert len(many) == LINE_CHARS and many.endswith("1 ': not an integer")
    short = "family 'tiled': names are lower-case letters"
    assert error_line(short) == short
    assert error_line("a\nb") == "a\\nb"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Problem(1, 1, 1, layout="n" * MB),
        lambda: Problem(1, 1, 1, precision="h" * MB),
        lambda: Problem.parse("x" * MB),
        lambda: Problem(-(10**5000), 1, 1),  # more digits than Python prints: said, not raised
        lambda: (
            Config.make("tiled", {"TILE": "1" * MB}).params
            and Family.load("tiled").resolve(Config.make("tiled", {"TILE": [1] * MB}))
        ),
    ],
)
def test_the_python_api_quotes_a_value_short(make):
    """The same bound where no error line is printed: autotune.matmul's UserError."""
    with pytest.raises(UserError) as exc:
        make()
    assert len(str(exc.value)) < QUOTE_CHARS + 200, str(exc.value)[:500]
