"""On the GPU: a small real search end to end, then export and check against its result."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_small_search_export_check(tmp_path):
    r = _cli("search", "--size", "512", "--family", "vectorized", "warptile", "--trials", "6",
             "--results", str(tmp_path / "results"), "--quiet", cwd=tmp_path)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    files = list((tmp_path / "results").glob("*/512x512x512.json"))
    assert len(files) == 1
    rec = json.loads(files[0].read_text())
    for fam in ("vectorized", "warptile"):
        e = rec["families"][fam]
        assert e["status"] == "ok" and e["error"] < 1e-5 and e["gflops"] > 0 and e["cublas"]["gflops"] > 0
    r = _cli("export", "--size", "512", "--results", str(tmp_path / "results"), "-o", str(tmp_path / "t.h"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "autotune_sgemm" in (tmp_path / "t.h").read_text()
    r = _cli("check", "--results", str(tmp_path / "results"), "--tolerance", "0.5", cwd=tmp_path)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
