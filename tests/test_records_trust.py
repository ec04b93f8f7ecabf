"""A results folder is input from outside (committed, shared, passed with --results, --priors
and $AUTOTUNE_RESULTS): what a record says must not reach generated code unescaped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import hostile_cases
import pytest
from helpers import have_nvcc
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.export import c_text, header_for_entry
from autotune.results import load_record, record_path
from autotune.types import Problem

SLUG = hostile_cases.SLUG
P = Problem(64, 64, 64)


def _record(folder: Path, change=None) -> Path:
    """The valid tiled record of hostile_cases at 64^3 under folder/results, `change`d."""
    hostile_cases.record(folder, change)
    return record_path(folder / "results", SLUG, P)


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
