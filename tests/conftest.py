import os
from pathlib import Path

import pytest

from autotune.kernels.limits import load_profile

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption(
        "--shard",
        default=None,
        metavar="K/N",
        help="run the K-th of N shards of the collected tests (1-based; tests dealt round-robin in node-id "
        "order, so each shard holds a share of every file): the GPU suite in runs that each fit a time limit",
    )


def pytest_collection_modifyitems(config, items):
    _leave_out_slow(config, items)
    shard = config.getoption("--shard")
    if not shard:
        return
    try:
        k, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--shard {shard!r}: expected K/N, e.g. 2/5") from None
    if not 1 <= k <= n:
        raise pytest.UsageError(f"--shard {shard!r}: K must be from 1 to N")
    order = sorted(items, key=lambda item: item.nodeid)
    keep = {id(item) for i, item in enumerate(order) if i % n == k - 1}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in keep])
    items[:] = [item for item in items if id(item) in keep]


def _leave_out_slow(config, items):
    """Without -m, tests marked slow are deselected: the plain `python -m pytest -q` stays a few
    minutes on two cores, and `-m slow` (CI's second step) runs the exhaustive rest. Any -m
    expression is taken as written, and a test named by its node id runs whatever its marks."""
    if config.option.markexpr:
        return
    named = tuple(arg.split("[")[0].replace(os.sep, "/").lstrip("./") for arg in config.args if "::" in arg)
    slow = [
        item
        for item in items
        if item.get_closest_marker("slow") and not (named and item.nodeid.split("[")[0].endswith(named))
    ]
    if slow:
        ids = {id(item) for item in slow}
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if id(item) not in ids]


@pytest.fixture(scope="session")
def h100():
    return load_profile("h100")


@pytest.fixture(autouse=True)
def _folders_looked_at_every_call(monkeypatch):
    # Tests change a results folder and call at once; the window that spares matmul its stats
    # (dispatch/table.RECHECK_S) has its own test.
    from autotune.dispatch import table

    monkeypatch.setattr(table, "RECHECK_S", 0.0)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # One NVRTC cache per test run, never the user's: pytest-xdist's workers share their run's
    # (each worker's base folder is one down from the run's), so a kernel two workers want is
    # built once (gpu/compile.py's entry lock). AUTOTUNE_TEST_CACHE names one that several runs
    # share (the GPU suite's shards on one machine).
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    monkeypatch.setenv("AUTOTUNE_CACHE", os.environ.get("AUTOTUNE_TEST_CACHE") or str(run / "nvrtc-cache"))
