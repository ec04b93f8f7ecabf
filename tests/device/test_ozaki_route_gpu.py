"""Ozaki scheme II behind its per-call check (gpu/ozaki_route.py): at the count run, C is the
engine's bit for bit in every layout, alpha and beta, whether the guess enqueued before the verdict
held, was too few or too many; what the check sends away reaches the fallback with the caller's
arguments and C untouched; and the route keeps SGEMM's accuracy."""

import numpy as np
import pytest

from autotune.kernels.ozaki_choice import errors, operands

pytestmark = pytest.mark.gpu
KINDS3 = ("smallint", "uniform", "coupled")


def _stored(x, transposed):
    """Return op(X) on the device as the caller stores it: X, or X^T's rows (then op is its .T)."""
    import cupy as cp

    return cp.asarray(np.ascontiguousarray(x.T)) if transposed else cp.asarray(x)


@pytest.mark.parametrize(("m", "k", "n"), [(128, 256, 96), (77, 1000, 130), (1, 33, 5)])
@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (-0.5, 2.0)])
def test_the_route_is_the_engine_at_the_admitted_count(m, k, n, ta, tb, alpha, beta):
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm
    from autotune.gpu.ozaki_route import OzakiRoute

    rng = np.random.default_rng(m + k + n)
    a, b = operands("rowscaled", m, k, n, rng)
    c0 = cp.asarray(rng.standard_normal((m, n)).astype(np.float32))
    sa, sb = _stored(a, ta), _stored(b, tb)
    got, v, ran = OzakiRoute()(sa, sb, alpha, beta, c0.copy(), ta, tb)
    assert v.method == "ozaki-int8" and v.moduli is not None and ran == v.moduli  # no guess yet
    want = OzakiGemm(v.moduli)(sa, sb, alpha, beta, c0.copy(), ta, tb)
    np.testing.assert_array_equal(got.get(), want.get())


def test_the_exponents_from_the_norms_are_the_passes():
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm
    from autotune.gpu.ozaki_guard import DeviceGuard

    x = cp.asarray(operands("wide", 300, 500, 8, np.random.default_rng(1))[0])
    for n in (5, 7, 8):
        eng = OzakiGemm(n)
        for axis, y in ((0, x), (1, x.T)):
            norms = DeviceGuard().norms(y, axis)
            np.testing.assert_array_equal(eng.exponents_of(norms, 500).get(), eng.exponents(y, axis).get())


@pytest.mark.parametrize("bad", ["coupled", "inf"])
def test_what_the_check_sends_away_reaches_the_fallback_untouched(bad):
    import cupy as cp

    from autotune.gpu.ozaki_route import OzakiRoute

    a, b = operands("coupled" if bad == "coupled" else "uniform", 64, 512, 48, np.random.default_rng(2))
    if bad == "inf":
        b[7, 3] = np.inf
    c0 = cp.asarray(np.full((64, 48), 3.0, np.float32))
    seen = []

    def fallback(*args):
        seen.append(args)
        assert np.all(args[4].get() == 3.0)  # C as the caller gave it
        return "fallback's C"

    sa, sb = cp.asarray(a), cp.asarray(b)
    out, v, ran = OzakiRoute(fallback=fallback)(sa, sb, 2.0, 1.0, c0, False, False)
    assert out == "fallback's C" and v.moduli is None and ran is None and len(seen) == 1
    assert seen[0][0] is sa and seen[0][1] is sb and seen[0][2:4] == (2.0, 1.0) and seen[0][4] is c0
    with pytest.raises(ValueError, match="another method"):
        OzakiRoute()(sa, sb)


def test_the_route_keeps_sgemm_accuracy():
    import cupy as cp

    from autotune.gpu.ozaki_route import OzakiRoute

    route = OzakiRoute()
    for kind in ("uniform", "normal", "wide", "cancelling", "rowscaled", "denormal", "smallint"):
        a, b = (cp.asarray(x) for x in operands(kind, 256, 1024, 192, np.random.default_rng(3)))
        c, v, _ = route(a, b)
        mine, sgemm = errors(c, a, b, xp=cp), errors(cp.matmul(a, b), a, b, xp=cp)
        assert mine[0] <= 1.5 * sgemm[0] and mine[1] <= 1.5 * sgemm[1], (kind, v, mine, sgemm)


@pytest.mark.parametrize("overlap", [True, False])
def test_a_guess_that_holds_is_too_few_or_too_many_gives_the_engine_s_c_at_the_count_run(overlap):
    """At 256 x 1024 x 192 the check admits 7 moduli for small integers and 8 for uniform inputs."""
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm
    from autotune.gpu.ozaki_route import OzakiRoute

    rng = np.random.default_rng(5)
    ints, unif, coupled = (tuple(cp.asarray(x) for x in operands(kind, 256, 1024, 192, rng)) for kind in KINDS3)
    c0 = cp.asarray(rng.standard_normal((256, 192)).astype(np.float32))
    seen = []
    route = OzakiRoute(fallback=lambda *args: seen.append(args[4].copy()) or "fallback", overlap=overlap)
    # (inputs, the check's count, the count run): no guess; 7 guessed, 8 needed; 8 guessed, 7
    # admitted (kept); the shape's last count, 7; a rejection, whatever was guessed.
    steps = [(ints, 7, 7), (unif, 8, 8), (ints, 7, 8), (ints, 7, 7), (unif, 8, 8), (coupled, None, None)]
    for (a, b), admitted, ran in steps:
        c, v, got = route(a, b, 1.5, -1.0, c0.copy())
        assert (v.moduli, got) == (admitted, ran)
        if ran is None:
            assert c == "fallback" and np.array_equal(seen[-1].get(), c0.get())  # C untouched
        else:
            want = OzakiGemm(ran)(a, b, 1.5, -1.0, c0.copy())
            np.testing.assert_array_equal(c.get(), want.get())


def test_the_route_on_a_stream_of_the_caller_s():
    """The check's stream waits for the caller's work on its stream, and C is ready on that stream."""
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm
    from autotune.gpu.ozaki_route import OzakiRoute

    a, b = (cp.asarray(x) for x in operands("normal", 512, 2048, 384, np.random.default_rng(6)))
    route, want = OzakiRoute(), None
    with cp.cuda.Stream(non_blocking=True) as s:
        for _ in range(3):
            x = a * 1.0  # made on the caller's stream just before the call
            c, v, ran = route(x, b)
            want = OzakiGemm(ran)(a, b) if want is None else want
            s.synchronize()
            np.testing.assert_array_equal(c.get(), want.get())


def test_bad_shapes_and_beta_without_c():
    import cupy as cp

    from autotune.gpu.ozaki_route import OzakiRoute

    route = OzakiRoute()
    with pytest.raises(ValueError, match="do not multiply"):
        route(cp.ones((4, 5), cp.float32), cp.ones((6, 3), cp.float32))
    with pytest.raises(ValueError, match="needs C"):
        route(cp.ones((4, 5), cp.float32), cp.ones((5, 3), cp.float32), beta=1.0)


@pytest.mark.parametrize("overlap", [True, False])
def test_with_the_elementwise_guarantee_a_call_it_holds_for_is_the_route_s_and_one_it_fails_falls_back(overlap):
    """element=True: dense inputs take the route as before, bit for bit; the adversarial row of
    kernels/tests' guarantee test (tiny a's lost in the scaling, most of C_00) goes to the fallback
    with C untouched, where the route alone would miss the bound."""
    import cupy as cp

    from autotune.core.tiers import tier
    from autotune.gpu.ozaki_route import OzakiRoute

    rng = np.random.default_rng(8)
    a, b = operands("uniform", 96, 512, 80, rng)
    sa, sb = cp.asarray(a), cp.asarray(b)
    sure = OzakiRoute(fallback=lambda *args: "fallback", overlap=overlap, element=True)
    got, v, ran = sure(sa, sb)
    want, w, _ = OzakiRoute()(sa, sb)
    assert v.method == "ozaki-int8" and ran == w.moduli
    np.testing.assert_array_equal(got.get(), want.get())

    a, b = operands("uniform", 8, 32, 8, rng)
    a[0], b[:, 0] = 2.0**-30, 1.0
    a[0, 0], b[0, 0] = 1.0, 2.0**-30
    sa, sb = cp.asarray(a), cp.asarray(b)
    c0 = cp.full((8, 8), 3.0, cp.float32)
    out, v, ran = sure(sa, sb, 1.0, 0.0, c0, False, False)
    assert out == "fallback" and v.moduli is None and ran is None and bool((c0 == 3.0).all())
    plain, w, _ = OzakiRoute(fallback=lambda *args: None)(sa, sb)
    if w.moduli is not None:  # the sampled check let it through: the guarantee is what stops it
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        err = np.abs(plain.get() - a64 @ b64)
        assert (err > tier("high").bound(32) * (np.abs(a64) @ np.abs(b64))).any()


def test_a_shape_sent_away_is_not_guessed_again_and_the_guarantee_runs_before_its_gemms(monkeypatch):
    """After a call the guarantee (or the check) sends away, the shape's next call enqueues no GEMMs
    before its verdict, and none at all when it is sent away again; a call it holds for is the
    route's as before."""
    import cupy as cp

    from autotune.gpu.ozaki import OzakiGemm
    from autotune.gpu.ozaki_route import OzakiRoute

    gemms = []
    real = OzakiGemm.products
    monkeypatch.setattr(OzakiGemm, "products", lambda self, ra, rb: gemms.append(self.n) or real(self, ra, rb))
    rng = np.random.default_rng(9)
    dense = tuple(cp.asarray(x) for x in operands("uniform", 96, 512, 80, rng))
    a, b = operands("uniform", 8, 32, 8, rng)
    a[0], b[:, 0] = 2.0**-30, 1.0
    a[0, 0], b[0, 0] = 1.0, 2.0**-30
    bad = cp.asarray(a), cp.asarray(b)
    sure = OzakiRoute(fallback=lambda *args: "fallback", element=True)
    assert sure(*dense).moduli is not None  # any shape's guess is now this count
    sure(*bad)  # its first call: the guess's GEMMs ran before the verdict
    assert sure._last[(8, 8, 32)] is None
    before = len(gemms)
    for _ in range(2):
        out, v, ran = sure(*bad)
        assert out == "fallback" and ran is None and v.moduli is None
    assert len(gemms) == before  # no guess, and the guarantee judged before any GEMM
    got, v, ran = sure(*dense)
    assert ran is not None and gemms[-1] == ran
    np.testing.assert_array_equal(got.get(), OzakiGemm(ran)(*dense).get())
