"""The folders of autotune/ are its layers, and imports run one way: down through them.

Every module is parsed (no import runs) and each of its imports mapped to the module it names:
at module level, inside a function, or under `if TYPE_CHECKING:` alike (a typing-only import is
a dependency a reader follows all the same). An import of a layer above fails, and so does a
circle of modules importing each other, inside one layer too. The package's face
(autotune/__init__.py, __main__.py) sits on top and may import any layer; a module inside a
layer never imports the package itself. CuPy is imported only as ARCHITECTURE.md says (`CUPY`).
ARCHITECTURE.md describes the same order.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "autotune"

# Bottom to top: a module may import its own layer and those before it.
LAYERS = ("core", "kernels", "gpu", "search", "records", "dispatch", "pytorch", "cli")
TOP = "autotune"  # the package's face: autotune/__init__.py and autotune/__main__.py
DATA = ("profiles",)  # folders of data, not code

# CuPy's packages, and the layers that may import them (those that hold device memory).
CUPY = ("cupy", "cupy_backends")
CUPY_LAYERS = ("gpu", "dispatch")

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


@functools.cache
def _parsed_once() -> dict[str, tuple[Path, ast.Module]]:
    return {m: (p, ast.parse(p.read_text(), str(p))) for m, p in MODULES.items()}


def _parsed(planted: dict[str, str] | None = None) -> dict[str, tuple[Path, ast.Module]]:
    """Dotted name -> (file, syntax tree) of every module; `planted` replaces a module's text
    (dotted name -> source) or adds one, as the checkers' own tests do."""
    out = dict(_parsed_once())
    for module, text in (planted or {}).items():
        path = MODULES.get(module) or PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        out[module] = (path, ast.parse(text, str(path)))
    return out


def _layer(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else TOP


def _rank(layer: str) -> int:
    return len(LAYERS) if layer == TOP else LAYERS.index(layer)


def _in_functions(tree: ast.Module) -> set[int]:
    """Ids of the nodes inside a function: imports there run when it is called, not on import."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    return inside


def _imported(module: str, path: Path, tree: ast.Module, eager: bool = False, known=MODULES) -> list[tuple[int, str]]:
    """(line, dotted target inside autotune) of each import of the package's own code, wherever
    it stands; with `eager`, only those that run when the module is imported (outside functions).
    `known`: the modules there are (`from X import name` names a module when X.name is one)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    lazy = _in_functions(tree) if eager else set()
    out = []
    for node in ast.walk(tree):
        if id(node) in lazy:
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
                out.append((node.lineno, sub if sub in known else target))
    return out


def _upward(parsed: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """Each import of a layer above the importer's, as 'file:line (layer) imports target (layer)'."""
    out = []
    for module, (path, tree) in parsed.items():
        mine = _layer(module)
        for line, target in _imported(module, path, tree, known=parsed):
            theirs = _layer(target)
            if _rank(theirs) > _rank(mine):
                out.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {target} ({theirs})")
    return out


def _circles(parsed: dict[str, tuple[Path, ast.Module]]) -> list[list[str]]:
    """The modules that import each other in a loop (directly or around several), one sorted
    list per loop: the strongly connected components of the import graph with more than one
    module (Tarjan's algorithm)."""
    graph = {
        m: {t for _, t in _imported(m, p, tree, known=parsed) if t in parsed and t != m}
        for m, (p, tree) in parsed.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            loop = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(loop) > 1:
                out.append(sorted(loop))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _cupy_imports(tree: ast.Module) -> list[tuple[int, bool]]:
    """(line, at module level) of each import of CuPy's packages."""
    lazy = _in_functions(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        if any(n.split(".")[0] in CUPY for n in names):
            out.append((node.lineno, id(node) not in lazy))
    return out


def _cupy_rule_broken(parsed: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """Where the CuPy rule is broken: CuPy imported outside gpu/ and dispatch/, or a module that
    imports CuPy at module level imported at module level by one that does not (which would then
    need CuPy to be imported itself, and so would `import autotune` if it loads that one)."""
    device = {m for m, (_, tree) in parsed.items() if any(top for _, top in _cupy_imports(tree))}
    out = []
    for module, (path, tree) in parsed.items():
        where = path.relative_to(ROOT)
        if _layer(module) not in CUPY_LAYERS:
            layers = "/, ".join(CUPY_LAYERS)
            out += [f"{where}:{line} imports CuPy outside {layers}/" for line, _ in _cupy_imports(tree)]
        if module not in device:
            out += [
                f"{where}:{line} imports {target}, which imports CuPy, at module level"
                for line, target in _imported(module, path, tree, eager=True, known=parsed)
                if target in device
            ]
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
    upward = _upward(_parsed())
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_the_rule_sees_imports_inside_functions_typing_only_and_of_the_package_itself():
    """The checker itself: a lazy import of a layer above, one under `if TYPE_CHECKING:`, and
    `from .. import __version__` (the package's face), are each caught."""
    planted = _parsed(
        {
            "autotune.records.results": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..cli import main\n"
            "def f():\n    from ..dispatch import api\n    from .. import __version__\n"
        }
    )
    found = [u for u in _upward(planted) if u.startswith("autotune/records/results.py:")]
    assert found == [
        "autotune/records/results.py:3 (records) imports autotune.cli (cli)",
        "autotune/records/results.py:5 (records) imports autotune.dispatch.api (dispatch)",
        "autotune/records/results.py:6 (records) imports autotune (autotune)",
    ]


def test_no_modules_import_each_other():
    circles = _circles(_parsed())
    assert not circles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_sees_a_loop_inside_one_layer_and_a_typing_only_one():
    """Planted: kernels/limits.py naming Family only for its annotations (family.py imports
    limits.py), and a three-module loop in core/."""
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .family import Family\n"
    circles = _circles(_parsed({"autotune.kernels.limits": typing_only}))
    assert any({"autotune.kernels.family", "autotune.kernels.limits"} <= set(c) for c in circles), circles
    loop = {
        "autotune.core.loop_a": "from . import loop_b\n",
        "autotune.core.loop_b": "def f():\n    from .loop_c import x\n",
        "autotune.core.loop_c": "from .loop_a import y\n",
    }
    assert ["autotune.core.loop_a", "autotune.core.loop_b", "autotune.core.loop_c"] in _circles(_parsed(loop))


def test_cupy_is_imported_only_where_architecture_md_says():
    broken = _cupy_rule_broken(_parsed())
    assert not broken, "CuPy imported against the rule:\n" + "\n".join(broken)


def test_the_cupy_check_sees_each_way_of_breaking_the_rule():
    """Planted: CuPy imported in records/ (even inside a function), and a module of dispatch/
    that imports CuPy at module level, itself imported at module level by dispatch/api.py (so
    `import autotune` would need CuPy)."""
    api = MODULES["autotune.dispatch.api"].read_text() + "\nfrom . import planted\n"
    planted = _parsed(
        {
            "autotune.records.results": "def f():\n    import cupy\n",
            "autotune.dispatch.planted": "import cupy as cp\n",
            "autotune.dispatch.api": api,
        }
    )
    line = len(api.splitlines())
    assert sorted(_cupy_rule_broken(planted)) == [
        f"autotune/dispatch/api.py:{line} imports autotune.dispatch.planted, which imports CuPy, at module level",
        "autotune/records/results.py:2 imports CuPy outside gpu/, dispatch/",
    ]
    # The same import inside a function keeps the rule, and so does one from a module that
    # imports CuPy at module level itself.
    lazy = api.replace("\nfrom . import planted\n", "\ndef g():\n    from . import planted\n")
    device = "import cupy\nfrom . import planted\n"
    planted = {"autotune.dispatch.planted": "import cupy as cp\n", "autotune.dispatch.api": lazy}
    assert _cupy_rule_broken(_parsed(planted | {"autotune.dispatch.other": device})) == []


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
