"""Docstrings summary-first, as Optuna writes them: the rule, checked on every module.

The rule, for the docstring of a module, class or function (methods and nested ones too):
- its first line is one whole sentence: not empty, ending with '.' or '?', and the line it
  stands on (indentation and quotes included) is at most SUMMARY_WIDTH characters;
- its second line, where there is one, is blank: detail (Args:, Returns:, Raises:, Example:, a
  paragraph) comes after a blank line, never as the summary running on;
- a module's docstring is at most MODULE_LINES lines: the why of a design goes next to the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUMMARY_WIDTH = 100
MODULE_LINES = 12

# Every module of the package: a new one is checked as soon as it exists.
DONE = sorted(p.relative_to(ROOT / "autotune").as_posix() for p in (ROOT / "autotune").rglob("*.py"))


def _documented(tree: ast.Module):
    """Yield (name, node) for the module and every def and class in it, nested ones too."""
    yield "<module>", tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node


def docstring_problems(source: str, where: str = "<text>") -> list[str]:
    """Return each way the docstrings of `source` break the rule, as 'where:line name: why'."""
    lines = source.splitlines()
    out = []
    for name, node in _documented(ast.parse(source)):
        first = node.body[0] if node.body else None
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
            continue
        if not isinstance(first.value.value, str):
            continue
        doc = first.value.value.split("\n")
        at = f"{where}:{first.lineno} {name}"
        summary = doc[0].strip()
        if not summary.endswith((".", "?")):
            out.append(f"{at}: the first line is not a whole sentence ({summary[-30:]!r})")
        if len(doc) > 1 and doc[1].strip():
            out.append(f"{at}: the summary runs on to a second line")
        if len(lines[first.lineno - 1]) > SUMMARY_WIDTH:
            out.append(f"{at}: the summary line is over {SUMMARY_WIDTH} characters")
        if isinstance(node, ast.Module) and len(doc) > MODULE_LINES:
            out.append(f"{at}: a module docstring of {len(doc)} lines (at most {MODULE_LINES})")
    return out


@pytest.mark.parametrize("module", DONE)
def test_docstrings_are_summary_first(module):
    path = ROOT / "autotune" / module
    assert not docstring_problems(path.read_text(encoding="utf-8"), module)


def test_every_module_is_checked():
    assert len(DONE) == len(set(DONE))
    assert all((ROOT / "autotune" / m).is_file() for m in DONE)
    # The glob reaches every layer and nested packages (a wrong root would check nothing).
    assert {"__init__.py", "kernels/family.py", "dispatch/fuzz/case.py", "pytorch/op.py"} <= set(DONE)


ESSAY = '''"""A module whose docstring is an essay: its summary runs on
to the next line, and it goes on and on.
"""


def f():
    """The summary

    with no full stop."""


class C:
    def g(self):
        """A fine summary, but on a line far too long for anyone to take in at one glance, alas, at all."""

    def h(self):
        """Fine."""
'''


def test_the_rule_catches_an_essay():
    found = docstring_problems(ESSAY)
    assert any("<module>: the summary runs on" in p for p in found)
    assert any("f: the first line is not a whole sentence" in p for p in found)
    assert any("g: the summary line is over" in p for p in found)
    assert not any(" h:" in p for p in found)
    long_module = '"""One line.\n\n' + "more\n" * MODULE_LINES + '"""\n'
    said = f"<text>:1 <module>: a module docstring of {MODULE_LINES + 3} lines (at most {MODULE_LINES})"
    assert docstring_problems(long_module) == [said]
