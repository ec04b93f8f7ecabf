"""The Ozaki route in records and the dispatch, without a GPU: a record's "routes" checked field by
field, written and taken out beside the families, and `high` calls at a shape sent to it only where
its record measured it faster, for one matrix on Hopper."""

import json
import os
import shutil

import pytest
from helpers import RESULTS, fake_kernels, restamp

from autotune import cli
from autotune.core.types import Problem, UserError
from autotune.dispatch import api, routes
from autotune.dispatch import table as dispatch_table
from autotune.kernels.space import Space
from autotune.records import store
from autotune.records.results import load_record, record_path

SLUG = "nvidia-h200"
HIGH = Problem(4096, 4096, 4096, precision="high")
LONG_AGO_NS = 1_600_000_000 * 10**9
CONTRACT_ROW = {"kind": "uniform", "errors": [3e-7, 4e-9], "limit": [1.8e-6, 1.7e-8], "cublas": [1.2e-6, 1.1e-8]}


def route_entry(**change) -> dict:
    """A route entry as dispatch/routes.measure makes it (less its "ok"), `change`d."""
    entry = {
        "moduli": 7,
        "advantage": 1.12,
        "time_ms": 1.1,
        "time_iqr_ms": 0.02,
        "versus": "wgmma_tf32",
        "versus_ms": 1.17,
        "cublas_ms": 2.7,
        "contract": [CONTRACT_ROW],
        "date": "2026-11-29",
        "guarantee": "element",
    }
    entry.update(change)
    return {k: v for k, v in entry.items() if v is not None}


def _high_record(root, shape: Problem = HIGH, routes_=None) -> None:
    """The stored 4096^3 record as a `high` one of wgmma_tf32 at `shape`, with `routes_`."""
    data = json.loads((RESULTS / SLUG / "4096x4096x4096.json").read_text())
    entry = dict(data["families"]["warptile"], gflops=90000.0)
    entry["config"] = {"family": "wgmma_tf32", "params": Space.load("wgmma_tf32").seeds[0].as_dict()}
    data["problem"] = shape.as_dict()
    data["families"], data["best"] = {"wgmma_tf32": entry}, "wgmma_tf32"
    restamp(data, keep="gflops")
    if routes_ is not None:
        data["routes"] = routes_
    (root / SLUG).mkdir(parents=True, exist_ok=True)
    store.atomic_write_text(root / SLUG / f"{shape.name}.json", json.dumps(data))
    os.utime(root / SLUG, ns=(LONG_AGO_NS, LONG_AGO_NS))


def test_a_route_entry_is_read_back_and_every_bad_field_refused(tmp_path):
    _high_record(tmp_path, routes_={"ozaki_int8": route_entry()})
    path = record_path(tmp_path, SLUG, HIGH)
    assert load_record(path)["routes"]["ozaki_int8"] == route_entry()
    bad = [
        (dict(advantage=0.5), "advantage"),
        (dict(advantage=float("1e9")), "advantage"),
        (dict(moduli=0), "moduli"),
        (dict(time_ms=-1.0), "time_ms"),
        (dict(versus_ms=None), "versus_ms"),
        (dict(versus="$(rm -rf ~)"), "versus"),
        (dict(date="yesterday"), "date"),
        (dict(contract=None), "no contract"),
        (dict(contract=[{**CONTRACT_ROW, "errors": [1e-5, 4e-9]}]), "limit"),
        (dict(ok=True), "unknown field"),
        (dict(guarantee="none; rm -rf ~"), "guarantee"),
    ]
    bad = [({"ozaki_int8": route_entry(**change)}, why) for change, why in bad]
    bad += [({"tf32x9": route_entry()}, "is not one of"), ([route_entry()], "not an object")]
    for value, fragment in bad:
        _high_record(tmp_path, routes_=value)
        with pytest.raises(UserError, match=fragment) as exc:
            load_record(path)
        assert str(exc.value).startswith(f"{path}: ") and "\n" not in str(exc.value)
    # Only `high` has a route: a strict record with one is refused.
    strict = Problem(4096, 4096, 4096)
    _high_record(tmp_path, strict, {"ozaki_int8": route_entry()})
    with pytest.raises(UserError, match="only `high`"):
        load_record(record_path(tmp_path, SLUG, strict))


def test_update_route_puts_it_beside_the_families_and_takes_it_out(tmp_path):
    assert store.update_route(tmp_path, SLUG, HIGH, routes.NAME, route_entry()) is None  # no record yet
    _high_record(tmp_path)
    path = record_path(tmp_path, SLUG, HIGH)
    before = load_record(path)
    assert store.update_route(tmp_path, SLUG, HIGH, routes.NAME, route_entry()) == path
    after = load_record(path)
    assert after["routes"] == {"ozaki_int8": route_entry()} and after["families"] == before["families"]
    store.update_route(tmp_path, SLUG, HIGH, routes.NAME, route_entry(time_ms=2.0))
    assert load_record(path)["routes"]["ozaki_int8"]["time_ms"] == 2.0
    store.update_route(tmp_path, SLUG, HIGH, routes.NAME, None)
    assert "routes" not in load_record(path)
    # A family merged later keeps the route the record holds.
    store.update_route(tmp_path, SLUG, HIGH, routes.NAME, route_entry())
    store.update_record(tmp_path, load_record(path)["gpu"], HIGH, load_record(path)["families"], replace=True)
    assert load_record(path)["routes"] == {"ozaki_int8": route_entry()}
    with pytest.raises(UserError, match="advantage"):  # never written as the reader would refuse it
        store.update_route(tmp_path, SLUG, HIGH, routes.NAME, route_entry(advantage=0.0))
    assert load_record(path)["routes"] == {"ozaki_int8": route_entry()}


class FakeRouted:
    routed = True

    def __init__(self, kernel, advantage, dev, note=""):
        self.kernel, self.advantage, self.dev, self.note = kernel, advantage, dev, note


@pytest.fixture
def fakes(monkeypatch):
    monkeypatch.delenv("AUTOTUNE_ROUTE", raising=False)  # the default: taken where faster
    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    monkeypatch.setattr(routes, "Routed", FakeRouted)
    return fake_kernels(monkeypatch, SLUG)


@pytest.mark.parametrize("route_ms, taken", [(1.1, True), (1.17, False), (1.3, False)])
def test_a_high_call_takes_the_route_only_where_its_record_measured_it_faster(tmp_path, fakes, route_ms, taken):
    root = tmp_path / "results"
    shutil.copytree(RESULTS / SLUG, root / SLUG)
    _high_record(root, routes_={"ozaki_int8": route_entry(time_ms=route_ms)})
    got = api._choose(0, HIGH, None, root)
    assert isinstance(got, FakeRouted) == taken
    if taken:
        assert got.kernel[1].startswith("wgmma_tf32_") and got.advantage == 1.12 and "1.06x" in got.note
    # At beta != 0 and in another layout's record alike; never strict FP32, a family asked for, or a batch.
    assert isinstance(api._choose(0, HIGH.with_beta(1.0), None, root), FakeRouted) == taken
    assert not isinstance(api._choose(0, Problem(4096, 4096, 4096), None, root), FakeRouted)
    assert not isinstance(api._choose(0, HIGH, "wgmma_tf32", root), FakeRouted)
    assert not isinstance(api._choose(0, Problem(4096, 4096, 4096, batch=2, precision="high"), None, root), FakeRouted)
    assert not isinstance(api._choose(0, Problem(4096, 4096, 4095, precision="high"), None, root), FakeRouted)


def test_the_route_is_taken_unless_turned_off_and_a_bad_value_is_one_line(tmp_path, fakes, monkeypatch):
    """Unset, empty or "ozaki" (the old opt-in), matmul takes a route measured faster; "off" keeps
    the family's kernel."""
    root = tmp_path / "results"
    _high_record(root, routes_={"ozaki_int8": route_entry()})
    for value, taken in (("", True), (None, True), ("ozaki", True), ("off", False)):
        if value is None:
            monkeypatch.delenv("AUTOTUNE_ROUTE")
        else:
            monkeypatch.setenv("AUTOTUNE_ROUTE", value)
        monkeypatch.setattr(dispatch_table, "_TABLES", {})
        assert isinstance(api._choose(0, HIGH, None, root), FakeRouted) == taken, value
    monkeypatch.setenv("AUTOTUNE_ROUTE", "ozaki; rm -rf ~")
    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    with pytest.raises(UserError, match="AUTOTUNE_ROUTE must be 'off', 'ozaki' or unset") as exc:
        api._choose(0, HIGH, None, root)
    assert "\n" not in str(exc.value)


def test_a_route_timed_without_the_elementwise_guarantee_is_not_taken(tmp_path, fakes):
    """An entry from before the guarantee ran without its cost: faster there is not faster now."""
    root = tmp_path / "results"
    _high_record(root, routes_={"ozaki_int8": route_entry(guarantee=None)})
    assert not routes.faster(load_record(record_path(root, SLUG, HIGH))["routes"]["ozaki_int8"])
    assert not isinstance(api._choose(0, HIGH, None, root), FakeRouted)


def test_no_route_off_hopper(tmp_path, fakes, monkeypatch):
    root = tmp_path / "results"
    _high_record(root, routes_={"ozaki_int8": route_entry()})
    monkeypatch.setattr(api, "_device_props", lambda dev: (SLUG, "sm_80"))
    assert not isinstance(api._choose(0, HIGH, None, root), FakeRouted)
    assert routes.usable(HIGH, "sm_90a") and not routes.usable(HIGH, "sm_100")


def test_the_options_that_steer_the_route():
    parser = cli.build_parser()
    assert parser.parse_args(["search", "--size", "4096", "--precision", "high", "--no-route"]).no_route
    assert not parser.parse_args(["search", "--size", "4096"]).no_route
    assert parser.parse_args(["fuzz", "--route"]).route and not parser.parse_args(["fuzz"]).route
