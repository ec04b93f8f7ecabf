from pathlib import Path

import pytest

from autotune.limits import load_profile

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def h100():
    return load_profile("h100")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # One NVRTC cache per test session, never the user's.
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path_factory.getbasetemp() / "nvrtc-cache"))
