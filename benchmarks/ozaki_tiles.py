"""The wgmma INT8 kernel's tiles timed on the device: TOPS of the Ozaki moduli's GEMMs per tile.

    python benchmarks/ozaki_tiles.py [--size 8192] [--moduli 7] [--check 4096 6144] [--top 5]
        [--kernel wgmma|wgmma_tma]

Every valid tile of --kernel (kernels/ozaki_wgmma.WgmmaTile, fed by cp.async, or
kernels/ozaki_wgmma_tma.WgmmaTmaTile, by tensor maps) with BN of 128, 192 or 256 is compiled (in
parallel processes, into the compile cache), its products checked equal to the fast kernel's, and
timed at --size; the --top fastest are then timed again at each --check size, shapes they were
not chosen on, beside the default tile.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cupy as cp
from ozaki_gpu import _time  # the same CUDA-event timer as the whole pipeline's

from autotune.gpu.compile import compile_source
from autotune.gpu.ozaki import KERNELS, ONE_LAUNCH, OzakiGemm
from autotune.kernels.ozaki_wgmma import WGMMA_ARCH, WgmmaTile

KINDS = ("wgmma", "wgmma_tma")  # the wgmma kernels of gpu/ozaki.KERNELS, whose tiles this sweeps


def _kernel(tile: WgmmaTile) -> str:
    """Return the name of the kernel `tile` is of."""
    return next(name for name in KINDS if type(tile) is KERNELS[name])


def tiles(kernel: str = "wgmma") -> list[WgmmaTile]:
    """Return every valid tile of `kernel` with BN 128, 192 or 256."""
    out = []
    for bm, bn, bk, stages in itertools.product((64, 128, 192, 256), (128, 192, 256), (128, 256), range(2, 9)):
        try:
            out.append(KERNELS[kernel](bm, bn, bk, stages))
        except ValueError:
            continue
    return out


def _build(tile: WgmmaTile) -> str:
    """Compile one tile into the cache (in a worker process); return '' or why it failed."""
    source, name = ONE_LAUNCH[_kernel(tile)]
    try:
        compile_source(source(tile), WGMMA_ARCH, name)
        return ""
    except Exception as exc:  # noqa: BLE001 - a tile that does not build is reported, not fatal
        return f"{type(exc).__name__}: {str(exc)[:200]}"


def rate(tile: WgmmaTile, size: int, n: int, ref: OzakiGemm) -> float:
    """Return the tile's INT8 TOPS at size^3 with n moduli, its products checked against ref's."""
    rng = cp.random.default_rng(size)
    a = rng.uniform(-1, 1, (size, size), dtype=cp.float32)
    b = rng.uniform(-1, 1, (size, size), dtype=cp.float32)
    eng = OzakiGemm(n, tile=tile, kernel=_kernel(tile))
    ra, rb = ref.scale(a, 0), ref.scale(b, 1)
    if not bool((eng.products(ra, rb) == ref.products(ra, rb)).all()):
        raise SystemExit(f"tile {tile}: products differ from the fast kernel's")
    return n * 2.0 * size**3 / _time(lambda: eng.products(ra, rb), 10) / 1e12


def main() -> None:
    """Print each tile's TOPS at --size, then the fastest at the --check sizes."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=8192, help="M = N = K the tiles are chosen at")
    p.add_argument("--moduli", type=int, default=7)
    p.add_argument("--check", type=int, nargs="*", default=[4096, 6144], help="sizes the fastest are re-timed at")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--kernel", default="wgmma", choices=KINDS, help="cp.async-fed wgmma or TMA-fed")
    args = p.parse_args()
    all_tiles = tiles(args.kernel)
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        built = dict(zip(all_tiles, pool.map(_build, all_tiles), strict=True))
    ref = OzakiGemm(args.moduli, kernel="fast")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}; {args.kernel} kernel; {args.moduli} moduli; {len(all_tiles)} tiles")
    rates = {}
    for tile, why in built.items():
        if why:
            print(f"  {tile}: {why}")
            continue
        rates[tile] = rate(tile, args.size, args.moduli, ref)
        print(f"  {args.size}^3 {tile}: {rates[tile]:.0f} TOPS", flush=True)
    best = sorted(rates, key=rates.get, reverse=True)[: args.top]
    default = KERNELS[args.kernel]()
    for tile in [*best, *([default] if default not in best else [])]:
        others = ", ".join(f"{s}^3 {rate(tile, s, args.moduli, ref):.0f}" for s in args.check)
        print(f"best {tile}: {args.size}^3 {rates[tile]:.0f} TOPS; {others}")


if __name__ == "__main__":
    main()
