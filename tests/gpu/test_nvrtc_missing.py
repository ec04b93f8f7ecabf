"""Without the cuda13/cuda12 extra, commands that compile stop with one line naming the extra."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.core.types import UserError
from autotune.gpu import compile as nvcompile

ROOT = Path(__file__).resolve().parents[2]
LINE = 'pip install "autotune[cuda13]" (or [cuda12] for a CUDA 12 driver)'

# Simulated installs, set up before autotune runs: CuPy absent (`pip install -e ".[test]"`), or
# CuPy present but no libnvrtc to be found.
NO_CUPY = "import sys; sys.modules.update(dict.fromkeys(['cupy', 'cupy_backends']))"
NO_LIBNVRTC = """
import cuda.pathfinder as pf
def _absent(name):
    raise pf.DynamicLibNotFoundError(f'Failure finding "lib{name}.so": not in this test')
pf.load_nvidia_dynamic_lib = _absent
"""


def _cli(prelude: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = f"{prelude}\nimport sys\nfrom autotune.cli import main\nsys.exit(main({args!r}))"
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOTUNE_CACHE=str(cwd / "cache"))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder holding one record (from a replayed search: no NVRTC involved)."""
    root = tmp_path_factory.mktemp("results")
    table = root.parent / "replay.json"
    table.write_text(json.dumps({"table": {"tiled_TILE16": 900.0, "tiled_TILE32": 700.0}}))
    args = "search --size 64 --family tiled --trials 2 --quiet --replay".split() + [str(table), "--results", str(root)]
    r = _cli("", args, root.parent)
    assert r.returncode == 0 and list(root.glob("*/64x64x64.json")), r.stderr
    return root


@pytest.mark.parametrize("prelude", [NO_CUPY, NO_LIBNVRTC], ids=["no-cupy", "no-libnvrtc"])
@pytest.mark.parametrize("command", ["dry-run", "check-static"])
def test_commands_that_compile_name_the_missing_extra(prelude, command, results, tmp_path):
    args = ["check", "--static", "--results", str(results)]
    if command == "dry-run":
        args = "search --size 64 --family tiled --dry-run --arch sm_90".split()
    r = _cli(prelude, args, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: NVRTC is not installed"), r.stderr
    assert lines[0].endswith(LINE)
    assert "compile_failed" not in r.stdout
    assert not (tmp_path / "results").exists()


def test_compile_source_raises_a_user_error(monkeypatch):
    monkeypatch.setattr(nvcompile, "_loaded", None)
    # Every CuPy module, also those other tests imported: an imported one is found without its parent.
    for name in [n for n in sys.modules if n.split(".")[0] in ("cupy", "cupy_backends")] + ["cupy", "cupy_backends"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(nvcompile.NVRTCMissing) as exc:
        nvcompile.compile_source(" ", "sm_90", "k", use_cache=False)
    assert isinstance(exc.value, UserError)
    assert str(exc.value) == f"NVRTC is not installed: {LINE}"
