"""Many parallel NVRTC compiles, each batch in a fresh process: counts the compiles that fail.

Every process starts with CuPy imported and NVRTC not yet loaded, and compiles one batch (one job
per thread) at once through `compile_many`, so every batch exercises the first load of NVRTC and
its builtins under threads -- where `failed to open libnvrtc-builtins.so.13.0` came from. No GPU
needed. Prints one line per process, then the totals; exit code 1 when any compile failed.

    python benchmarks/compile_stress.py                      # 200 compiles, threads = max(16, CPUs)
    python benchmarks/compile_stress.py --compiles 400 --threads 32 --source tiny
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# Runs from a checkout without an install too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TINY = 'extern "C" __global__ void %s(float* x) { x[threadIdx.x] = sinf(x[threadIdx.x]) * 2.0f; }\n'


def sources(kind: str, n: int, tag: str) -> list[tuple[str, str]]:
    # A unique line per source: NVRTC and autotune's cache never serve a compile here.
    if kind == "tiny":
        return [(TINY % "stress_kernel" + f"// {tag} {i}\n", "stress_kernel") for i in range(n)]
    from autotune.kernels.render import DEFAULT_KERNEL, render
    from autotune.kernels.space import Family, Space

    fam = Family.load(kind)
    seeds = Space.load(fam).seeds
    return [(render(fam.resolve(seeds[i % len(seeds)])) + f"\n// {tag} {i}\n", DEFAULT_KERNEL) for i in range(n)]


def child(args) -> None:
    # CuPy first, as in any process that probed the GPU (the CLI does) or uses CuPy itself: then
    # nothing else serialises the threads' first calls into NVRTC.
    import cupy  # noqa: F401 - imported for its side effect: CuPy first, as in the CLI

    from autotune.gpu.compile import CompileError, compile_many

    jobs = sources(args.source, args.batch, f"{os.getpid()}-{time.time_ns()}")
    t0 = time.perf_counter()
    out = compile_many(jobs, args.arch, workers=args.threads, use_cache=False)
    errors = [str(r) for r in out if isinstance(r, CompileError)]
    print(
        json.dumps(
            {
                "n": len(out),
                "failed": len(errors),
                "builtins": sum("builtins" in e for e in errors),
                "example": errors[0][:300] if errors else "",
                "s": time.perf_counter() - t0,
            }
        )
    )


def versions() -> str:
    from importlib import metadata

    from autotune.gpu.compile import nvrtc_version

    got = []
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12", "cuda-pathfinder"):
        try:
            got.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    # Where the system loader would find NVRTC's builtins by name: there a thread that loses the
    # first-load race still finds them (whichever copy that is), so failures cannot show.
    system = []
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        system += [line.split("=>")[-1].strip() for line in cache.splitlines() if "libnvrtc-builtins.so" in line]
    except OSError:
        pass
    for d in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        system += sorted(str(p) for p in Path(d).glob("libnvrtc-builtins.so*"))
    return (
        f"NVRTC {nvrtc_version()}; "
        + ", ".join(got)
        + f"; builtins on the system library path: {', '.join(system) if system else 'none'}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compiles", type=int, default=200, help="compiles in all (default 200)")
    p.add_argument(
        "--threads",
        type=int,
        default=max(16, os.cpu_count() or 1),
        help="compile threads per process, and compiles per process (default max(16, CPUs))",
    )
    p.add_argument("--source", default="tiled", help="'tiny', or a family whose seeds are compiled (default tiled)")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--versions", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.versions:
        print(versions())
        return 0
    if args.child:
        child(args)
        return 0

    # Versions from a process of their own: this one never loads NVRTC.
    probe = subprocess.run([sys.executable, __file__, "--versions"], capture_output=True, text=True)
    print(
        f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        + (probe.stdout.strip() or " ".join(probe.stderr.strip().splitlines()[-1:]))
    )
    print(f"{args.compiles} compiles ({args.source}, {args.arch}), {args.threads} threads per fresh process")
    total = failed = builtins = 0
    t0 = time.monotonic()
    while total < args.compiles:
        batch = min(args.threads, args.compiles - total)
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--batch",
            str(batch),
            "--threads",
            str(args.threads),
            "--source",
            args.source,
            "--arch",
            args.arch,
        ]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"process failed (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
            failed += batch
            total += batch
            continue
        res = json.loads(r.stdout.strip().splitlines()[-1])
        total, failed, builtins = total + res["n"], failed + res["failed"], builtins + res["builtins"]
        print(
            f"  process: {res['n']} compiles in {res['s']:.1f} s, {res['failed']} failed "
            f"({res['builtins']} builtins)" + (f": {res['example']}" if res["example"] else ""),
            flush=True,
        )
    print(f"{total} compiles, {builtins} builtins failures, {failed} failures in all ({time.monotonic() - t0:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
