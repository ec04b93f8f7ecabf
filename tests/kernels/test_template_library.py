"""The templates as a library: no template past 400 lines, no block of code written twice (shared
code lives in the underscore-prefixed macro files), every include and macro a whole C block (its
braces balance), and the retired CLUSTER_M of wgmma_tf32 still read from stored configs."""

import re

import pytest

from autotune.core.types import UserError
from autotune.kernels.family import TEMPLATE_DIR, Family
from autotune.kernels.render import render

# Lines that carry no code of their own: a block of them is spelling, not a repeated piece.
_TRIVIA = re.compile(r"^([{}();]*|#pragma unroll( \d+)?|\{%-? *(else|endif|endfor|endcall|endmacro) *-?%\})$")
_BLOCK = 6


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, stripped line) of the code: a family's declaration (YAML in its leading
    comment, which cannot include another file) and trivia left out."""
    lines = text.splitlines()
    start = 0
    if text.startswith("{#- autotune"):
        start = next(i for i, line in enumerate(lines) if line.strip() == "-#}") + 1
    return [
        (i + 1, line.strip())
        for i, line in enumerate(lines)
        if i >= start and line.strip() and not _TRIVIA.match(line.strip())
    ]


def test_no_template_is_longer_than_400_lines():
    long = {p.name: n for p in TEMPLATE_DIR.glob("*.j2") if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_no_block_of_code_is_written_twice():
    seen: dict[tuple[str, ...], str] = {}
    twice = []
    for path in sorted(TEMPLATE_DIR.glob("*.j2")):
        lines = _code_lines(path.read_text())
        for i in range(len(lines) - _BLOCK + 1):
            block = tuple(line for _, line in lines[i : i + _BLOCK])
            here = f"{path.name}:{lines[i][0]}"
            if block in seen:
                twice.append(f"{here} repeats {seen[block]}")
            else:
                seen[block] = here
    assert not twice, "\n".join(twice[:10])


def test_the_check_finds_a_repeated_block(tmp_path):
    """The rule above is not vacuous: a template's own block pasted again is found."""
    text = (TEMPLATE_DIR / "_tile.cuh.j2").read_text()
    lines = _code_lines(text + "\n" + text)
    blocks = [tuple(line for _, line in lines[i : i + _BLOCK]) for i in range(len(lines) - _BLOCK + 1)]
    assert len(set(blocks)) < len(blocks)


# What a brace count skips, in the order met: a Jinja comment, tag (group 1: its keyword) or
# expression, a C comment, string or character; else a brace of the C code.
_SKIPPED_OR_BRACE = re.compile(
    r"""\{#.*?#\}|\{%[-+]?\s*(\w+).*?[-+]?%\}|\{\{.*?\}\}|//[^\n]*|/\*.*?\*/"""
    r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|[{}]""",
    re.S,
)


def brace_faults(name: str, text: str) -> list[str]:
    """Where a template's C braces cross a partial's edge: for the file outside its macros, each
    macro's body and each call block's body (the caller's code a call macro wraps), a line when
    it closes a brace it did not open or leaves one open. Braces in Jinja comments, tags and
    expressions and in C comments, strings and characters are not counted."""
    units = [[f"{name} (outside its macros)", 0]]  # [what, depth] of the bodies open here
    faults = []
    for m in _SKIPPED_OR_BRACE.finditer(text):
        token, keyword = m.group(0), m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        if keyword in ("macro", "call"):
            units.append([f"{name}:{line} {keyword} body", 0])
        elif keyword in ("endmacro", "endcall"):
            what, depth = units.pop()
            if depth:
                faults.append(f"{what}: {depth} brace(s) left open at line {line}")
        elif token == "{":
            units[-1][1] += 1
        elif token == "}":
            if units[-1][1] == 0:
                faults.append(f"{units[-1][0]}: line {line} closes a brace it did not open")
            else:
                units[-1][1] -= 1
    what, depth = units.pop()
    if depth:
        faults.append(f"{what}: {depth} brace(s) left open at its end")
    return faults


def test_every_include_and_macro_is_a_whole_c_block():
    """A partial (an included file, a macro, a call block's body) opens and closes its own braces:
    one that closes a loop its includer opened cannot be read, or changed, on its own."""
    faults = [f for path in sorted(TEMPLATE_DIR.glob("*.j2")) for f in brace_faults(path.name, path.read_text())]
    assert not faults, "\n".join(faults)


def test_the_brace_check_finds_a_partial_that_crosses_a_scope():
    """The rule above is not vacuous: a macro that closes a loop it did not open and opens one it
    does not close, and a file that closes a brace it did not open, are found; braces in Jinja
    and in C comments and strings are not counted."""
    crossing = """{% macro product_then_rows() %}
            acc += a * b;
        }
    }
    for (int i = 0; i < {{ TM }}; ++i) {
{%- endmacro %}
"""
    assert brace_faults("t", crossing) == [
        "t:1 macro body: line 3 closes a brace it did not open",
        "t:1 macro body: line 4 closes a brace it did not open",
        "t:1 macro body: 1 brace(s) left open at line 6",
    ]
    assert brace_faults("t", "{{ tile.tail_units() }}\n        body();\n    }\n") == [
        "t (outside its macros): line 3 closes a brace it did not open"
    ]
    whole = """{#- { #}
{% macro m(x="{") %}
    if (c) { s = "}"; t = '{'; }  // }
    /* { */ {{ "}" if x else "{" }}
{%- endmacro %}
{% call m() %}{ body(); }{% endcall %}
"""
    assert brace_faults("t", whole) == []


def test_a_stored_wgmma_config_naming_the_retired_cluster_m_still_resolves():
    fam = Family.load("wgmma_tf32")
    params = {"BM": 128, "BN": 128, "STAGES": 3, "GROUP_M": 8, "PRECISION": "high", "ACC": "fp32"}
    with_it = fam.resolve({**params, "CLUSTER_M": 1})
    assert with_it.config == fam.resolve(params).config
    src = render(with_it)
    assert "__cluster_dims__" not in src and "multicast" not in src
    with pytest.raises(UserError, match="CLUSTER_M"):
        fam.resolve({**params, "CLUSTER_M": 2})
