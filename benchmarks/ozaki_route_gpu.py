"""The Ozaki route with its check against its engine alone and cuBLAS SGEMM, and where its time goes.

At each size (M = N = K, uniform inputs): the route (gpu/ozaki_route.py, the check at `--advantage`:
1 where cuBLAS was measured to sum as one chain), with `--element` the route holding every
element within the bound too (gpu/ozaki_element.py), the engine alone at 7 moduli and cuBLAS SGEMM
(CuPy's matmul, TF32 off), each timed two ways in one process: a call alone (CUDA events around
it, the device idle before: what a single call pays, the host's launches included) and
back-to-back (events around --reps calls: what a program calling it in a loop pays), twice each.
Then the route's timeline at the size: when each stage ends on the device and the host, from
the start of a call (CUDA events and the host clock; medians of 8 calls).

    PYTHONPATH=. python benchmarks/ozaki_route_gpu.py [--sizes 2048 4096 8192] [--reps 20] [--advantage 1.1]
        [--element [--low-side]]
"""

from __future__ import annotations

import argparse
import time

import cupy as cp
import numpy as np
from ozaki_gpu import _time

from autotune.gpu.ozaki import OzakiGemm, Stats
from autotune.gpu.ozaki_route import OzakiRoute


def _loop(fn, reps: int) -> float:
    """Return the mean us of `reps` calls of `fn()` back to back (CUDA events around them all)."""
    fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) * 1e3 / reps


def _event(stream=None) -> cp.cuda.Event:
    e = cp.cuda.Event()
    e.record(stream)
    return e


def _timeline(route: OzakiRoute, a: cp.ndarray, b: cp.ndarray, count: int) -> str:
    """Return when each stage of a call ends (us from its start), as the route orders them."""
    g, k, rows = route.guard, a.shape[1], []
    for _ in range(8):
        cp.cuda.Device().synchronize()
        h0, e0 = time.perf_counter(), _event()
        sa = sb = None
        if route.element is not None:
            sa, sb = Stats.empty(a.shape[0]), Stats.empty(b.shape[1])
        na, nb = g.norms(a, 0, stats=sa), g.norms(b, 1, stats=sb)
        e_norms, h_norms = _event(), time.perf_counter()
        run = route._stages(count, a, b, na, nb, k)
        e_gemm, h_stages = _event(), time.perf_counter()
        route._side.wait_event(e_norms)
        with route._side:
            s0 = _event(route._side)
            pending = g.launch(a, b, route.max_moduli, 0, (na, nb), route.advantage)
            s1 = _event(route._side)
            floor = route._floor(a, b, (sa, sb))
            s2 = _event(route._side)
        h_check = time.perf_counter()
        pending.verdict()
        h_verdict = time.perf_counter()
        if floor is not None:
            route._holds(floor, run.ex)
        h_element = time.perf_counter()
        run.ex.eng.reconstruct(run.p, run.ra.e, run.rb.e, cp.empty((a.shape[0], b.shape[1]), cp.float32))
        e_end = _event()
        e_end.synchronize()

        def us(x, y):
            return cp.cuda.get_elapsed_time(x, y) * 1e3

        dev = [us(e0, e_norms), us(e0, s0), us(e0, s1), us(e0, s2), us(e0, e_gemm), us(e0, e_end)]
        host = [(h - h0) * 1e6 for h in (h_norms, h_stages, h_check, h_verdict, h_element)]
        rows.append(dev + host)
    m = np.median(np.array(rows), axis=0)
    floor = f" (+ floor {m[3]:.0f}; judged, host {m[10]:.0f})" if route.element is not None else ""
    return (
        f"device: norms {m[0]:.0f}, check {m[1]:.0f}-{m[2]:.0f}, GEMMs {m[4]:.0f}, end {m[5]:.0f}; host: norms "
        f"enqueued {m[6]:.0f}, residues and GEMMs {m[7]:.0f}, check {m[8]:.0f}, verdict read {m[9]:.0f}{floor}"
    )


def main() -> None:
    """Print two lines of times and a timeline per size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096, 8192])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--advantage", type=float, default=1.1)
    p.add_argument("--element", action="store_true", help="time the route with its elementwise guarantee too")
    p.add_argument(
        "--low-side",
        action="store_true",
        help="with --element, also a route whose check and floor stream has the default priority (their blocks "
        "after the GEMMs' instead of before them)",
    )
    args = p.parse_args()
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; us; x SGEMM (one call, back to back)")
    for size in args.sizes:
        rng = cp.random.default_rng(size)
        a = rng.random((size, size), dtype=cp.float32) * 2 - 1
        b = rng.random((size, size), dtype=cp.float32) * 2 - 1
        route, eng = OzakiRoute(advantage=args.advantage), OzakiGemm(7)
        sure = OzakiRoute(advantage=args.advantage, element=True) if args.element else None
        low = OzakiRoute(advantage=args.advantage, element=True) if args.element and args.low_side else None
        if low is not None:
            low._side = cp.cuda.Stream(non_blocking=True)  # the default priority
        reps = args.reps if size < 8192 else max(4, args.reps // 3)
        calls = {
            "route": lambda route=route, a=a, b=b: route(a, b),
            **({"route+element": lambda r=sure, a=a, b=b: r(a, b)} if sure else {}),
            **({"route+element, low side": lambda r=low, a=a, b=b: r(a, b)} if low else {}),
            "engine 7": lambda eng=eng, a=a, b=b: eng(a, b),
            "SGEMM": lambda a=a, b=b: cp.matmul(a, b),
        }
        for trial in range(2):
            got = {name: (_time(fn, reps) * 1e6, _loop(fn, reps)) for name, fn in calls.items()}
            sg = got["SGEMM"]
            print(
                f"{size}^3 #{trial + 1}: "
                + "; ".join(f"{n} {x:.0f} / {y:.0f} ({sg[0] / x:.2f}x, {sg[1] / y:.2f}x)" for n, (x, y) in got.items()),
                flush=True,
            )
        count = route(a, b).moduli
        for r in [x for x in (route, sure, low) if x is not None]:
            print(f"{size}^3 timeline at {count} moduli (us from a call's start): {_timeline(r, a, b, count)}")


if __name__ == "__main__":
    main()
