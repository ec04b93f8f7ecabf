"""Ozaki scheme II's memory passes alone on the GPU: the exponents, the residues and the CRT.

    python benchmarks/ozaki_passes_gpu.py --sizes 4096 8192 --moduli 7

For each size (square operands, float32) and number of moduli, each pass's median time over ROUNDS
rounds of REPS back-to-back launches between CUDA events, and the bytes it must move over that time
(GB/s), beside a device-to-device copy of the same bytes: a pass near the copy's rate is bound by
memory, one well below it by its instructions. The INT8 GEMMs are benchmarks/ozaki_gpu.py's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy as cp
from untuned import gpu_ms  # benchmarks/: the script's own folder

from autotune.gpu.ozaki import OzakiGemm

REPS, ROUNDS = 10, 5


def _time(fn) -> float:
    """Return the median seconds of one `fn()` over ROUNDS rounds of REPS calls, by CUDA events."""
    fn()
    return statistics.median(gpu_ms(fn, REPS) for _ in range(ROUNDS)) / 1e3


def _line(name: str, seconds: float, moved: float, copy_rate: float) -> str:
    """Return one pass's line: microseconds, GB/s, and that rate against the copy's."""
    rate = moved / seconds
    return f"  {name:<22} {seconds * 1e6:8.1f} us  {rate / 1e9:7.0f} GB/s  ({rate / copy_rate:.2f} of a copy)"


def main() -> None:
    """Print each pass's time and rate for each size and number of moduli."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192], help="square sizes (default 4096 8192)")
    ap.add_argument("--moduli", type=int, nargs="+", default=[7], help="numbers of moduli (default 7)")
    args = ap.parse_args()
    if any(s < 1 for s in args.sizes) or any(not 2 <= n <= 20 for n in args.moduli):
        ap.error("sizes must be positive and moduli 2 to 20")
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; uniform [-1, 1) operands")
    for size in args.sizes:
        rng = cp.random.default_rng(size)
        a = rng.uniform(-1, 1, (size, size), dtype=cp.float32)
        b = rng.uniform(-1, 1, (size, size), dtype=cp.float32)
        words = cp.empty_like(a)
        copy = _time(lambda a=a, words=words: words.__setitem__(Ellipsis, a))
        copy_rate = 2 * a.nbytes / copy
        print(f"{size}^2: device copy {copy * 1e6:.1f} us, {copy_rate / 1e9:.0f} GB/s")
        for n in args.moduli:
            eng = OzakiGemm(n)
            ra, rb = eng.scale(a, 0), eng.scale(b, 1)
            p = eng.products(ra, rb)
            c = cp.empty((size, size), cp.float32)
            elems = size * size
            print(f" {n} moduli")
            for name, x, axis in (("rows (A)", a, 0), ("columns (B)", b, 1)):
                t_exp = _time(lambda x=x, axis=axis, eng=eng: eng.exponents(x, axis))
                t_all = _time(lambda x=x, axis=axis, eng=eng: eng.scale(x, axis))
                print(_line(f"exponents, {name}", t_exp, 4 * elems, copy_rate))
                print(_line(f"residues, {name}", t_all - t_exp, (4 + n) * elems, copy_rate))
            t_crt = _time(lambda eng=eng, p=p, e=ra.e, f=rb.e, c=c: eng.reconstruct(p, e, f, c))
            print(_line("CRT", t_crt, (n + 4) * elems, copy_rate))


if __name__ == "__main__":
    main()
