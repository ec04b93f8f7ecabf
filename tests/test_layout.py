"""The folders of autotune/ are its layers, and imports run one way: down through them.

Every module is parsed (no import runs), each of its imports -- at module level or inside a
function -- mapped to the layer it names, and an import of a layer above is a failure. The
package's face (autotune/__init__.py, __main__.py) sits on top and may import any layer; a
module inside a layer never imports the package itself (that is how `__version__` used to run
back up). ARCHITECTURE.md describes the same order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "autotune"

# Bottom to top: a module may import its own layer and those before it.
LAYERS = ("core", "kernels", "gpu", "search", "records", "dispatch", "pytorch", "cli")
TOP = "autotune"  # the package's face: autotune/__init__.py and autotune/__main__.py
DATA = ("profiles",)  # folders of data, not code

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else TOP


def _rank(layer: str) -> int:
    return len(LAYERS) if layer == TOP else LAYERS.index(layer)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under `if TYPE_CHECKING:`: annotations only, never executed, so
    they make no dependency at run time (gpu/fuzzing.py names the fuzzer's Case that way)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _imported(module: str, path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, dotted target inside autotune) of each import of the package's own code."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skip = _type_checking_only(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "autotune"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "autotune":
                target = node.module
            else:
                continue
            # `from X import name`: name is a submodule when X.name is one (`from .. import cost`)
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES else target))
    return out


def test_every_module_sits_in_a_layer():
    stray = [
        m
        for m in MODULES
        if _layer(m) == TOP and m not in ("autotune", "autotune.__main__") and m.split(".")[1] not in DATA
    ]
    assert not stray, f"modules outside the layer folders {LAYERS}: {stray}"
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").is_file(), layer


def test_imports_run_down_through_the_layers():
    upward = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        mine = _layer(module)
        for line, target in _imported(module, path, tree):
            theirs = _layer(target)
            if _rank(theirs) > _rank(mine):
                upward.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {target} ({theirs})")
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_the_rule_sees_imports_inside_functions_and_of_the_package_itself(tmp_path):
    """The checker itself: a lazy import of a layer above, and `from .. import __version__`
    (the package's face), are both caught."""
    path = PACKAGE / "records" / "results.py"
    tree = ast.parse("def f():\n    from ..dispatch import api\n    from .. import __version__\n")
    targets = [t for _, t in _imported("autotune.records.results", path, tree)]
    assert targets == ["autotune.dispatch.api", "autotune"]
    assert [_rank(_layer(t)) > _rank("records") for t in targets] == [True, True]


def test_every_layer_is_in_the_wheel():
    """pyproject.toml lists packages by name: a folder missing there is missing from the wheel."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and newer
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert folders <= listed, folders - listed


def _long_modules() -> list[str]:
    return [
        f"{p.relative_to(PACKAGE)} ({n})"
        for p in MODULES.values()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]


def _long_functions() -> list[str]:
    out = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(PACKAGE)}:{node.name} ({n})")
    return out


LONG_MODULES = _long_modules()
LONG_FUNCTIONS = _long_functions()


def test_no_module_over_400_lines():
    assert not LONG_MODULES, f"modules over {MAX_MODULE_LINES} lines: {', '.join(LONG_MODULES)}"


def test_no_function_over_60_lines():
    assert not LONG_FUNCTIONS, f"functions over {MAX_FUNCTION_LINES} lines: {', '.join(LONG_FUNCTIONS)}"
