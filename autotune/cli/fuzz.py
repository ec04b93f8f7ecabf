"""`autotune fuzz`: the dispatch's differential fuzzer (dispatch/fuzz/) on this GPU's results.

It shows progress, a table per regime, and a one-line repro for each failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from ..core.types import Problem, UserError
from .inputs import every_few_seconds, int_in
from .options import arch as sm_arch

EPILOG = """examples:
  autotune fuzz                                  2,000 random problems and every stored kernel once
  autotune fuzz --problems 20000 --seed 7        a longer run; the same seed draws the same problems
  autotune fuzz --coverage 0 --problems 500      the dispatch alone
  autotune fuzz --repro '[{"regime": ...}]'      run the calls a failure printed, in a fresh process
  autotune fuzz --compile-only --gpu nvidia-h100-80gb-hbm3   no GPU: fill the compile cache first
"""


def add_parser(sub) -> None:
    """Add the `fuzz` command to the subparsers `sub`."""
    f = sub.add_parser(
        "fuzz",
        help="check autotune.matmul and every stored kernel against FP64 on random problems (exit 1 if wrong)",
        description="Differential fuzzing of the dispatch on this GPU: random problems from every regime "
        "(few rows or columns, small K, tiny, general, large, batches, broadcast), layout, row pitch, "
        "offset, alpha and beta, data (integers whose result must be exact; NaN and Inf), precision tier, "
        "out given or not (half the calls made twice: a call seen before), one after "
        "another and on two streams at once, through autotune.matmul; and "
        "each stored kernel in each layout and batching it can be built for, at shapes near its own. "
        "Each element is checked against the FP64 product within the worst-case rounding of its tier, "
        "and nothing outside C may change. A failure is shrunk to the fewest, simplest calls and "
        "printed as a one-line 'autotune fuzz --repro ...'.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("--problems", type=int_in(1, 10**6), default=2000, help="random problems (default 2000)")
    f.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0, help="draws the problems (default 0)")
    f.add_argument(
        "--coverage",
        type=int_in(0, 100),
        default=1,
        metavar="N",
        help="problems for each stored kernel in each layout and batching it can be built for (default 1; 0: none)",
    )
    f.add_argument("--results", type=Path, help="results folder (default: the one autotune.matmul reads)")
    f.add_argument("--shrink", type=int_in(0, 100), default=3, metavar="N", help="failures to shrink (default 3)")
    f.add_argument("--repro", metavar="JSON", help="run these calls (as a failure prints them) and nothing else")
    f.add_argument(
        "--compile-only",
        action="store_true",
        help="no GPU needed: compile the kernels a run would load into the compile cache, then stop",
    )
    f.add_argument("--gpu", metavar="NAME", help="with --compile-only: whose results (default: the only one)")
    f.add_argument(
        "--arch", type=sm_arch, metavar="SM", help="with --compile-only: the target (default: the records' own)"
    )
    f.add_argument(
        "--seconds",
        type=int_in(0, 10**7),
        default=0,
        metavar="S",
        help="stop calling after S seconds and report what ran (default 0: no limit)",
    )
    f.add_argument(
        "--route",
        action="store_true",
        help="every random problem at --precision high, each of one matrix on the Ozaki INT8 route (behind its "
        "per-call check, cuBLAS taken as one FP32 chain: the least it may ask) whatever the records say",
    )
    f.add_argument("--quiet", action="store_true", help="no progress lines")


def cmd_fuzz(args) -> int:
    """Run `autotune fuzz`; return the exit code (1 if a call was wrong)."""
    from ..dispatch import fuzz
    from ..dispatch.api import _device_limits
    from ..dispatch.table import results_dir

    root = args.results if args.results is not None else results_dir()
    if args.results is not None:
        os.environ["AUTOTUNE_RESULTS"] = str(args.results)  # what autotune.matmul reads in this process
    if args.compile_only:
        return _compile_only(args, root)
    if args.repro is not None:
        return _repro(fuzz.parse_repro(args.repro), args.route)
    executor, slug, arch, dev = _executor(args.route)
    records = _records(root, slug)
    random_cases = list(fuzz.cases(args.seed, args.problems, torch=executor.torch is not None))
    if args.route:
        random_cases = [dataclasses.replace(c, precision="high") for c in random_cases]
    covered = _coverage(records, arch, _device_limits(dev, arch), args)
    _say(args, f"fuzz: {len(random_cases)} random problems, {len(covered)} for {_kernels(covered)} stored kernels"
         f" ({slug}, results {root})")  # fmt: skip
    _precompile(covered, arch, args)
    calls = fuzz.interleave(random_cases, covered, args.seed)
    tally, failures, fatal = _run(executor, calls, args)
    print(tally.table())
    for index in failures[: 0 if fatal else args.shrink]:  # after a CUDA fault nothing more runs
        _show_failure(executor, calls, index, args)
    if fatal:
        print(f"fuzz: stopped after a CUDA error at call {failures[-1] + 1}; the context is gone", file=sys.stderr)
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in executor.seconds.items())
    print(f"fuzz: host time in preparing the arrays, the calls and the checks: {phases}")
    print(f"fuzz: {tally.total} problems, {tally.total_wrong} wrong (seed {args.seed})")
    return 1 if tally.total_wrong else 0


def _say(args, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr, flush=True)


def _kernels(cases) -> int:
    return len({c.kernel.name for c in cases})


def _executor(route: bool = False):
    """Return (the fuzzer's Executor, GPU slug, arch, device) of this GPU; else one UserError.

    Args:
        route: `high` calls on the Ozaki route (device.routed_matmul).
    """
    from ..dispatch.api import _device_props
    from ..dispatch.kernel import gpu_arrays

    try:
        dev = gpu_arrays().current_device()
        slug, arch = _device_props(dev)
        from ..dispatch.fuzz.device import Executor, routed_matmul

        return Executor(matmul=routed_matmul if route else None), slug, arch, dev
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - CuPy's errors for no driver or device vary by version
        raise UserError(
            f"no usable CUDA GPU ({type(exc).__name__}); 'autotune fuzz --compile-only' works without one"
        ) from None


def _records(root, slug: str) -> list[tuple[Problem, dict]]:
    """Return the records as matmul reads them, each stored config checked by its family."""
    from ..dispatch.table import _table

    return _table(os.fspath(root), slug).records


def _coverage(records, arch: str, limits, args):
    """Return the cases that run each stored kernel, and the fallback config, --coverage times."""
    from ..dispatch import fuzz
    from ..dispatch.api import fallback_config

    if args.coverage == 0:
        return []
    extra = [(Problem(777, 555, 333), fallback_config(arch))]  # the dispatch's config for a GPU nobody tuned
    return fuzz.coverage(records, extra, args.seed, args.coverage, limits)


def _precompile(cases, arch: str, args) -> None:
    """Compile the kernels the cases load into the compile cache, in parallel."""
    # autotune.load compiles one at a time.
    from ..gpu.compile import compile_many
    from ..kernels.family import cached_family
    from ..kernels.render import DEFAULT_KERNEL, render

    configs = {c.kernel.name: c.kernel for c in cases}
    if not configs:
        return
    t0 = time.perf_counter()
    jobs = []
    for cfg in configs.values():
        resolved = cached_family(cfg.family).resolve(cfg)
        jobs.append((render(resolved), DEFAULT_KERNEL, resolved.family.compile_arch(arch)))
    done = compile_many(jobs, arch, progress=every_few_seconds("fuzz: compiling", "kernels", quiet=args.quiet))
    failed = sum(1 for d in done if isinstance(d, Exception))
    _say(args, f"fuzz: {len(jobs)} kernels compiled or found in the cache in {time.perf_counter() - t0:.0f} s"
         + (f", {failed} failed to compile" if failed else ""))  # fmt: skip


def _compile_only(args, root) -> int:
    from ..kernels.limits import profile_for_arch
    from ..records.results import resolve_gpu

    slug = resolve_gpu(root, args.gpu)
    records = _records(root, slug)
    arch = args.arch or _records_arch(root, slug) or "sm_90"
    covered = _coverage(records, arch, profile_for_arch(arch), args)
    _precompile(covered, arch, args)
    print(f"fuzz: compiled the {_kernels(covered)} kernels of {slug} for {arch}")
    return 0


def _records_arch(root, slug: str) -> str | None:
    from ..records.results import iter_records

    for _, rec in iter_records(root, slug):
        return rec["gpu"]["arch"]
    return None


def _run(executor, calls, args):
    """Run the calls; return (their tally, the indices of the failures, whether one was fatal)."""
    from ..dispatch.fuzz import Tally

    tally, failures, fatal = Tally(), [], False
    t0 = last = before = time.perf_counter()
    for index, (case, outcome) in enumerate(executor.run(calls)):
        now = time.perf_counter()
        tally.add(case, outcome.ok, outcome.ratio, now - before)  # (a stream pair's time goes to its first)
        before = now
        if not outcome.ok:
            failures.append(index)
            print(f"fuzz: WRONG at call {index + 1} ({case.regime}): {outcome.reason}", file=sys.stderr, flush=True)
            if outcome.fatal:
                fatal = True
                break
        if args.seconds and now - t0 > args.seconds and index + 1 < len(calls):
            print(f"fuzz: the {args.seconds} s are up after {index + 1} of {len(calls)} problems", file=sys.stderr)
            break
        if now - last > 10:
            last = now
            _say(args, f"fuzz: {index + 1}/{len(calls)} problems, {tally.total_wrong} wrong ({now - t0:.0f} s)")
    return tally, failures, fatal


def _show_failure(executor, calls, index: int, args) -> None:
    """Shrink the failure at call `index` and print its one-line repro."""
    from ..dispatch.fuzz import repro_line, shrink

    def fails(seq):
        executor.reset()
        outcomes = [o for _, o in executor.run(seq)]
        return not outcomes[-1].ok

    history = calls[: index + 1]
    _say(args, f"fuzz: shrinking the failure at call {index + 1}")
    shrunk = shrink(history, fails)
    if shrunk is None:
        print(f"fuzz: call {index + 1} fails only after the calls before it: autotune fuzz --seed {args.seed} "
              f"--problems {args.problems} --coverage {args.coverage}")  # fmt: skip
        return
    print(f"fuzz: {len(shrunk)} call(s) show it: {repro_line(shrunk)}" + (" --route" if args.route else ""))


def _repro(calls, route: bool = False) -> int:
    """Run the calls of --repro in this process; return the exit code (1 if one was wrong)."""
    executor, *_ = _executor(route)
    wrong = 0
    for i, (case, outcome) in enumerate(executor.run(calls)):
        state = "ok" if outcome.ok else f"WRONG: {outcome.reason}"
        print(f"call {i + 1} {case.regime} {case.problem.name}: {state}")
        wrong += not outcome.ok
    return 1 if wrong else 0
