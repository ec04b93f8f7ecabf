"""Untrusted inputs, tried as an attacker would, at the mechanism each goes through: YAML with
aliases that recurse (the one YAML loader), spaces too large to enumerate (the enumeration),
templates that raise, nest too deeply or reach for Python (the sandboxed Jinja environment and
the declaration's parser), a damaged compile-cache entry (the cache reader) and a repro line
nested too deeply. Each is one UserError naming what is wrong, or for the cache a miss.

Where the code before these checks hung or ate memory, the check runs in a child process under
a memory cap, with a timeout as a hang guard."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from autotune.kernels.family import Family

ROOT = Path(__file__).resolve().parent.parent
TILED = (ROOT / "templates" / "tiled.cu.j2").read_text()
HANG_GUARD_S = 60
MEMORY_CAP = 2 << 30  # the child's address space: what grew for ever fails fast instead


def _child(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`code` run by a fresh Python (this checkout's autotune) under MEMORY_CAP and the hang guard."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        preexec_fn=cap,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _family(folder: Path, name: str, old: str, new: str) -> Family:
    """A family `name` in `folder`: tiled's template with `old` replaced by `new`."""
    assert old in TILED
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.cu.j2").write_text(TILED.replace(old, new, 1))
    return Family.load(name, folder)


# ---- YAML aliases --------------------------------------------------------------------------


def test_a_recursive_alias_is_one_line_naming_the_file_and_line_and_shared_aliases_still_load():
    r = _child(
        """
        from autotune.core import yamlio
        from autotune.core.types import UserError
        for text in ("space: {TILE: &x [16, *x]}", "a: 1\\nb: &m {c: *m}", "m: &m {a: 1, <<: *m}",
                     "- &a [[[*a]]]", "x: &x\\n  y: [1, {z: *x}]"):
            try:
                yamlio.parse(text, "f.yaml")
                print("loaded", repr(text))
            except UserError as exc:
                print(exc)
        print(yamlio.parse("a: &a [1, 2]\\nb: [*a, *a]\\nc: {d: *a}", "f.yaml"))
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert [ln.split(": ", 1)[0] for ln in lines[:5]] == ["f.yaml:1", "f.yaml:2", "f.yaml:1", "f.yaml:1", "f.yaml:1"]
    assert all("a recursive alias" in ln for ln in lines[:5]), lines
    assert lines[5] == "{'a': [1, 2], 'b': [[1, 2], [1, 2]], 'c': {'d': [1, 2]}}"
