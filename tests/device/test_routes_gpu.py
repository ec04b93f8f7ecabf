"""On the GPU: `high` calls on the Ozaki route where a record says it measured faster
(dispatch/routes.py): the route's C in every layout, with out, alpha and beta; what its check
sends away is the family kernel's C; and the search's measure makes an entry a record takes."""

import cupy as cp
import numpy as np
import pytest

from autotune.core.types import Measurement, Problem, Status
from autotune.dispatch import api, routes
from autotune.dispatch import table as dispatch_table
from autotune.kernels.space import Space
from autotune.records import fields
from autotune.records.store import make_entry, update_record, update_route

pytestmark = pytest.mark.gpu
M, N, K = 384, 320, 1000


def _record(root, layout: str, route: dict) -> Problem:
    """A `high` record of wgmma_tf32 at M x N x K in `layout`, with `route` beside it."""
    from autotune.cli.inputs import live_limits
    from autotune.records.results import live_gpu_slug

    info = live_limits(0).to_dict()
    shape = Problem(M, N, K, layout, precision="high")
    space = Space.load("wgmma_tf32")
    cfg = space.family.built_for(space.fallback, shape)
    m = Measurement(cfg, shape, Status.OK, time_ms=0.05, gflops=shape.flops / 0.05e6, error=1e-7, registers=168)
    m.spill_bytes, m.smem_bytes = 0, 66560
    cublas = {"time_ms": 0.1, "gflops": shape.flops / 0.1e6, "error": 1e-7}
    entry = make_entry(m, cublas, search={}, versions={}, command="test", limits=info)
    gpu = {"name": info["name"], "slug": live_gpu_slug(), "arch": info["arch"]}
    update_record(root, gpu, shape, {"wgmma_tf32": entry})
    update_route(root, gpu["slug"], shape, routes.NAME, route)
    return shape


def _route(time_ms=0.04, advantage=1.0):
    row = {"kind": "uniform", "errors": [1e-7, 1e-9], "limit": [2e-6, 2e-8], "cublas": [1.3e-6, 1.3e-8]}
    return {"moduli": 7, "advantage": advantage, "time_ms": time_ms, "time_iqr_ms": 0.001, "versus": "wgmma_tf32",
            "versus_ms": 0.05, "cublas_ms": 0.1, "contract": [row], "date": "2026-11-29",
            "guarantee": "element"}  # fmt: skip


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(tmp_path))
    monkeypatch.setenv("AUTOTUNE_ROUTE", "ozaki")
    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    return tmp_path


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_a_routed_high_call_is_the_route_s_c_in_every_layout(results, layout):
    from autotune.gpu.ozaki import OzakiGemm

    shape = _record(results, layout, _route())
    chosen = api._choose(0, shape)
    assert getattr(chosen, "routed", False) and chosen.advantage == 1.0, chosen
    assert chosen.kernel.config.family == "wgmma_tf32"
    rng = cp.random.default_rng(4)
    a = rng.standard_normal((K, M) if layout[0] == "t" else (M, K), dtype=cp.float32)
    b = rng.standard_normal((N, K) if layout[1] == "t" else (K, N), dtype=cp.float32)
    opa, opb = (a.T if layout[0] == "t" else a), (b.T if layout[1] == "t" else b)
    c0 = rng.standard_normal((M, N), dtype=cp.float32)
    out = c0.copy()
    chosen.route._last.clear()  # no guess from another test's shape: the count run is the verdict's
    chosen.route._recent = None
    got = api.matmul(opa, opb, out, 1.5, -0.5, precision="high")
    assert got is out
    ran = chosen.route._last[(M, N, K)]  # the count the check admitted (the first call: no guess)
    want = OzakiGemm(ran)(opa, opb, 1.5, -0.5, c0.copy())
    np.testing.assert_array_equal(out.get(), want.get())
    # The trans flags on the stored matrices: the same problem, the same C.
    flags = api.matmul(a, b, trans_a=layout[0] == "t", trans_b=layout[1] == "t", precision="high")
    np.testing.assert_array_equal(flags.get(), OzakiGemm(chosen.route._last[(M, N, K)])(opa, opb).get())


def test_what_the_check_sends_away_is_the_family_kernel_s_c(results):
    shape = _record(results, "nn", _route())
    rng = cp.random.default_rng(5)
    a = rng.standard_normal((M, K), dtype=cp.float32)
    b = rng.standard_normal((K, N), dtype=cp.float32)
    a[3, 7] = cp.inf
    c0 = rng.standard_normal((M, N), dtype=cp.float32)
    got = api.matmul(a, b, c0.copy(), 2.0, 1.0, precision="high")
    chosen = api._choose(0, shape)
    want = chosen.kernel(a, b, c0.copy(), 2.0, 1.0)
    np.testing.assert_array_equal(got.get(), want.get())
    assert bool(cp.isinf(got[3]).all()) or bool(cp.isnan(got[3]).any())


def test_a_slower_route_is_not_taken(results):
    shape = _record(results, "nn", _route(time_ms=0.06))
    assert not getattr(api._choose(0, shape), "routed", False)


def test_the_search_s_measure_makes_an_entry_a_record_takes():
    space = Space.load("wgmma_tf32")
    shape = Problem(1024, 768, 2048, "nt", precision="high")
    cfg = space.family.built_for(space.fallback, shape)
    m = routes.measure(shape, cfg, reps=3)
    assert m.pop("ok") is True, m  # normal, uniform and wide inputs within 1.5x cuBLAS's errors
    fields.check_routes({routes.NAME: m}, "high")
    assert m["advantage"] >= 1.0 and 1 <= m["moduli"] <= 8 and m["versus"] == "wgmma_tf32"
    assert [r["kind"] for r in m["contract"]] == ["uniform", "normal", "wide"]
