"""`autotune search`'s options: what to tune, how long and how, where it runs and what it prints.

What: shapes, families, spaces. How: budget, sampler, storage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..kernels.family import known_families
from ..search import strategies
from .inputs import ASK_ABOVE_S, TABLE_SHAPES, int_in
from .options import (
    MAX_WORKERS,
    arch,
    device,
    jobs,
    positive_seconds,
    seconds,
    seed,
    shape_args,
    trials,
    window,
)

EPILOG_SEARCH = """examples:
  autotune search --size 4096                      all families, 4096^3, this GPU
  autotune search --m 8192 --n 8192 --k 1024 --family warptile --trials 60
  autotune search --size 4096 --family vectorized --config my_space.yaml
  autotune search --size 4096 --precision high     FP32-accurate on tensor cores (3xTF32)
  autotune search --size 4096 --dry-run --sample 50   no GPU: filter every point, compile 50 a family
"""


def add_parser(sub) -> None:
    """Add `search` and its options to the subcommands `sub`."""
    s = _search_parser(sub)
    _search_control_args(s)
    _search_run_args(s)
    _route_args(s)


def _search_parser(sub) -> argparse.ArgumentParser:
    """Add `search` with what to tune (shapes, families, spaces)."""
    s = sub.add_parser(
        "search",
        help="tune kernels for a shape on this GPU and record the best",
        description="Search each family's space with Optuna: static filter, NVRTC compile, "
        "verify against cuBLAS, time with CUDA events; write results/<gpu>/<MxNxK>.json.",
        epilog=EPILOG_SEARCH,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    shape_args(s)
    s.add_argument(
        "--sizes", metavar="LIST", help="several shapes: comma list of N or MxNxK (e.g. 1024,2048,8192x8192x1024)"
    )
    s.add_argument("--shapes-file", type=Path, metavar="FILE", help="several shapes: one N or MxNxK per line")
    s.add_argument(
        "--table",
        action="store_true",
        help=f"the representative grid of {len(TABLE_SHAPES)} shapes (squares, rectangles, deep and shallow K, a few "
        "rows or columns, small) that autotune.matmul chooses from for shapes never tuned; with --layout or "
        "--batch, in that layout or batch",
    )
    s.add_argument(
        "--family",
        nargs="+",
        metavar="F",
        help=f"families to tune (default: all; known: {', '.join(known_families())})",
    )
    s.add_argument(
        "--config",
        action="append",
        type=Path,
        metavar="FILE",
        default=[],
        help="YAML space replacing a family's default (its 'family:' key, or the one --family)",
    )
    s.add_argument(
        "--no-seeds",
        action="store_true",
        help="a cold search: leave out each family's seeds (configs measured on other GPUs, tried first by "
        "default), as on a GPU nobody has tuned for; TPE then starts from the configs a static cost model "
        "ranks best (autotune/search/cost.py); its studies are kept apart from seeded ones",
    )
    s.add_argument(
        "--priors",
        nargs="+",
        metavar="GPU",
        default=[],
        help="also try first what was tuned on these GPUs (results folder names under --results, e.g. "
        "nvidia-h100-80gb-hbm3, or paths to such folders): each family's stored configs at the 3 nearest "
        "shapes, measured here like seeds (never taken as results); those that are not valid points here "
        "are left out",
    )
    return s


def _search_control_args(s: argparse.ArgumentParser) -> None:
    """Add `search`'s options for how long and how (budget, sampler, storage)."""
    s.add_argument(
        "--trials",
        type=trials,
        help="distinct configs to measure per family (default 30, or with --timeout as many as its time "
        "allows; a resumed study counts earlier ones)",
    )
    s.add_argument(
        "--timeout",
        type=seconds,
        metavar="SEC",
        help="wall-time budget for each shape's search (each of --sizes gets it), shared out over its "
        "families, the likeliest to win first (priors, then those built for the tier, GPU or shape, then the "
        "cost model's estimate) and an overrun taken from the last; the last 40%% of a "
        "family's time (or trials, whichever comes first) goes to neighbours of its best configs",
    )
    s.add_argument(
        "--sampler",
        choices=strategies.names(),
        default=strategies.DEFAULT,
        help="search strategy: "
        + "; ".join(f"{n}: {strategies.get(n).summary}" for n in strategies.names()).replace("%", "%%")
        + f" (default {strategies.DEFAULT})",
    )
    s.add_argument("--seed", type=seed, default=0, help="sampler and input seed, 0 to 2**32 - 1 (default 0)")
    s.add_argument("--storage", metavar="URL", help="Optuna storage (default sqlite:///results/<gpu>/optuna.db)")


def _route_args(s: argparse.ArgumentParser) -> None:
    """Add `search`'s option for the Ozaki route of `--precision high`."""
    s.add_argument(
        "--no-route",
        action="store_true",
        help="with --precision high: do not time the Ozaki INT8 route beside the best kernel after the search "
        "(by default it is, on Hopper for one matrix, and recorded where it meets the tier's contract: "
        "autotune.matmul takes it where it measured faster)",
    )


def _search_run_args(s: argparse.ArgumentParser) -> None:
    """Add `search`'s options for where it runs and what it prints (arch, devices, dry run)."""
    s.add_argument(
        "--arch",
        type=arch,
        metavar="SM",
        help="compile for this arch, sm_<digits>[a] (default: the GPU's; sm_90 for --dry-run)",
    )
    s.add_argument("--device", type=device, default=0, help="CUDA device index (default 0; with --workers, the first)")
    s.add_argument(
        "--workers",
        type=int_in(1, MAX_WORKERS),
        default=1,
        help=f"worker processes on one study (at most {MAX_WORKERS}), worker i on device --device+i (default 1); "
        "several hosts share a study through --storage postgresql://...",
    )
    s.add_argument(
        "--window",
        type=window,
        help="trials in flight a worker (default: --jobs, at most an eighth of --trials, at least 8): "
        "compiled in parallel while the GPU runs the first ready; a wider window keeps more compile "
        "cores busy, and TPE asks with fewer results",
    )
    s.add_argument(
        "--candidate-timeout",
        type=positive_seconds,
        default=30.0,
        metavar="SEC",
        help="a candidate taking longer is recorded as a timeout and its worker replaced (default 30)",
    )
    s.add_argument(
        "--replay",
        metavar="FILE",
        help="evaluate from recorded measurements (JSON table) instead of a GPU: for tests and demos",
    )
    s.add_argument("--jobs", type=jobs, help="parallel NVRTC compiles (default: CPU cores, at most 16)")
    s.add_argument("--results", type=Path, default=Path("results"), help="results folder (default ./results)")
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: render, filter and compile every point; print counts and top rejection reasons",
    )
    s.add_argument(
        "--sample",
        type=trials,
        metavar="N",
        help="with --dry-run: compile a random N of each family's valid points (default: all)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress display")
    s.add_argument(
        "--verbose",
        action="store_true",
        help="print NVRTC's whole log for each kind of compile failure (the summary shows its first lines)",
    )
    s.add_argument(
        "--yes",
        action="store_true",
        help=f"go ahead with a search or dry run estimated to take over {ASK_ABOVE_S // 60} minutes "
        "(without it, such a run stops at once and says how many points and about how long)",
    )
