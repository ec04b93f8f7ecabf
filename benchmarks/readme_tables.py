"""The README's results tables, from the stored results: print them, or check README.md.

    python benchmarks/readme_tables.py --gpu nvidia-h200                    # print the table
    python benchmarks/readme_tables.py --gpu nvidia-h200 --check README.md  # exit 1 if it differs
    python benchmarks/readme_tables.py --check README.md                    # every GPU under results/

One row per stored strict-FP32 shape (`results/<gpu>/<M>x<N>x<K>.json`), in the order of the
shape sweep (benchmarks/sweep.py), then any others by size: the winning config's schedule, its
TFLOP/s, cuBLAS's from the same process, the ratio (three decimals where two would read 1.00)
and the relative error. Records of the precision tiers (`..._high.json`, `..._medium.json`) make
a second table (TIER_HEADER): the tier's bar is cuBLAS SGEMM for high and cuBLAS with TF32
products for medium, and the speed is also given against SGEMM. The check looks in the README
section whose heading names the GPU ("Results on an H200") for each table by its header, and
lists the rows that differ.
"""

from __future__ import annotations

import argparse
import ast
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.core.types import Problem  # noqa: E402 - after the sys.path line (runs from a checkout)
from autotune.records.results import gpu_dirs, iter_records  # noqa: E402 - after the sys.path line (runs from a checkout)

HEADER = (
    "| shape (MxNxK) | winning schedule (BMxBNxBK, stages, FMA order) | TFLOP/s | cuBLAS TFLOP/s | ratio | rel. error |"
)
RULE = "|---|---|---|---|---|---|"
TIER_HEADER = (
    "| shape (MxNxK) | tier | winning config (tile, stages, where products are summed) | TFLOP/s "
    "| tier's bar: cuBLAS TFLOP/s | ratio | x cuBLAS SGEMM | rel. error |"
)
TIER_RULE = "|---|---|---|---|---|---|---|---|"
ORDERS = {0: "row-major", 1: "column-major", 2: "serpentine"}
SCHEDULES = {
    "stream_k": "stream-K",
    "split_launch": "split launch",
    "split_persistent": "split launch in one kernel",
    "split_fused": "split launch in one launch",
}


def sweep_shapes() -> list[str]:
    """The shapes of benchmarks/sweep.py's SETS, set after set, read without importing it (it
    imports the GPU side)."""
    tree = ast.parse((ROOT / "benchmarks" / "sweep.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SETS" for t in node.targets):
            sets = ast.literal_eval(node.value)
            return list(dict.fromkeys(Problem.parse(s).name for shapes in sets.values() for s in shapes))
    raise SystemExit("benchmarks/sweep.py: no SETS of shapes found")


def schedule(entry: dict, problem: Problem) -> str:
    """'128x256x16, 7 stages, serpentine, split launch' for warptile, '128x256, 4 stages, summed on
    the tensor cores' for the tensor-core families; params for other families."""
    p, family = entry["config"]["params"], entry["config"]["family"]
    if family in ("wgmma_tf32", "mma_tf32"):
        tile = f"{p['BM']}x{p['BN']}" + (f"x{p['BK']}" if "BK" in p else "")
        acc = "summed on the tensor cores" if p.get("ACC") == "tc" else "FP32 sums"
        extra = [f"split-K {p['SPLITK']}"] if p.get("SPLITK", 1) > 1 else []
        extra += ["operands read in place"] if p.get("DIRECT") else []
        return ", ".join([f"{family} {tile}", f"{p['STAGES']} stages", acc, *extra])
    if family != "warptile":
        return f"{family} " + " ".join(f"{k}={v}" for k, v in sorted(p.items()))
    parts = [f"{p['BM']}x{p['BN']}x{p['BK']}", f"{p['STAGES']} stages", ORDERS.get(p["MMA_ORDER"], "?")]
    if p.get("SCHEDULE", "data_parallel") != "data_parallel":
        parts.append(SCHEDULES.get(p["SCHEDULE"], p["SCHEDULE"]))
    if p.get("SPLITK", 1) > 1:
        parts.append(f"split-K {p['SPLITK']}")
    if p.get("A_ROWS", 0):
        parts.append("A kept as stored")
    if p.get("PACKB", 0) == 2 and p.get("TRANS_B", 0):
        parts.append("B transposed first")
    elif p.get("PACKB", 0) and not p.get("TRANS_B", 0) and problem.N % 4:
        parts.append("B packed")
    return ", ".join(parts)


def ratio(r: float) -> str:
    two = f"{r:.2f}x"
    return f"{two} ({r:.3f})" if two == "1.00x" else two


def rows(results: Path, slug: str, tiers: bool = False) -> list[tuple[Problem, dict]]:
    """(problem, best entry) of each strict-FP32 record, or with `tiers` of each tier record."""
    order = {name: i for i, name in enumerate(sweep_shapes())}
    out = []
    for _path, rec in iter_records(results, slug):
        problem = Problem(**rec["problem"])
        if rec["best"] is not None and (problem.precision != "highest") == tiers:
            out.append((problem, rec["families"][rec["best"]]))

    def key(pe: tuple[Problem, dict]) -> tuple:
        """Tier, then the sweep's order of the shape, then size and name."""
        p = pe[0]
        return (p.precision, order.get(p.with_precision("highest").name, len(order)), p.flops, p.name)

    return sorted(out, key=key)


def table(results: Path, slug: str) -> list[str]:
    lines = [HEADER, RULE]
    for problem, e in rows(results, slug):
        lines.append(
            f"| {problem.name} | {schedule(e, problem)} | {e['gflops'] / 1000:.1f} | "
            f"{e['cublas']['gflops'] / 1000:.1f} | {ratio(e['ratio'])} | {e['error']:.1e} |"
        )
    return lines


def tier_table(results: Path, slug: str) -> list[str]:
    """The precision tiers' records (empty when there are none)."""
    lines = []
    for problem, e in rows(results, slug, tiers=True):
        paths = e["cublas"].get("paths", {})
        sgemm = min((paths[p] for p in ("matmul", "gemm") if p in paths), default=e["cublas"]["time_ms"])
        lines.append(
            f"| {problem.name} | {problem.precision} | {schedule(e, problem)} | {e['gflops'] / 1000:.1f} | "
            f"{e['cublas']['gflops'] / 1000:.1f} | {ratio(e['ratio'])} | {sgemm / e['time_ms']:.2f}x | "
            f"{e['error']:.1e} |"
        )
    return [TIER_HEADER, TIER_RULE, *lines] if lines else []


def summary(results: Path, slug: str, tiers: bool = False) -> str:
    """The geometric mean of the ratios, lowest ratio and count: of the strict-FP32 table, or with
    `tiers` of each tier against its own bar."""
    groups: dict[str, list[float]] = {}
    for p, e in rows(results, slug, tiers):
        groups.setdefault(p.precision, []).append(e["ratio"])
    if not groups:
        return "no results"
    text = "; ".join(
        f"{'' if tier == 'highest' else tier + ': '}geometric mean {statistics.geometric_mean(r):.3f}x "
        f"{'cuBLAS' if tier == 'highest' else 'its bar'}, lowest {min(r):.3f}x, {len(r)} shapes"
        for tier, r in groups.items()
    )
    return text[:1].upper() + text[1:]


def gpu_name(results: Path, slug: str) -> str:
    return next((rec["gpu"]["name"] for _p, rec in iter_records(results, slug)), slug)


def readme_table(readme: str, name: str, header: str = HEADER) -> list[str] | None:
    """The table with `header` in the README section whose heading names this GPU (its model,
    e.g. 'H200' of 'NVIDIA H200'), or None."""
    model = re.sub(r"^NVIDIA\s+", "", name).split()[0]
    section = None
    for block in re.split(r"(?m)^## ", readme):
        heading = block.splitlines()[0] if block else ""
        if re.search(rf"\b{re.escape(model)}\b", heading):
            section = block
            break
    if section is None:
        return None
    lines = section.splitlines()
    if header not in lines:
        return None
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def check(readme_path: Path, results: Path, slug: str) -> list[str]:
    """What differs between the README's tables for this GPU and the stored results (empty: none)."""
    name = gpu_name(results, slug)
    problems = []
    for header, want in ((HEADER, table(results, slug)), (TIER_HEADER, tier_table(results, slug))):
        have = readme_table(readme_path.read_text(), name, header)
        if have is None and want:
            problems.append(f"{readme_path}: no table headed '{header}' in a section naming {name}")
        elif have is not None:
            problems += _differences(have, want or [header, ""], results, slug)
    return problems


def _differences(have: list[str], want: list[str], results: Path, slug: str) -> list[str]:
    problems = []
    have_rows = {ln.split("|")[1].strip(): ln for ln in have[2:]}
    for line in want[2:]:
        shape = line.split("|")[1].strip()
        if have_rows.get(shape) != line:
            problems.append(f"{shape}: README has {have_rows.get(shape, 'no row')!r}, results give {line!r}")
    for shape in sorted(set(have_rows) - {ln.split("|")[1].strip() for ln in want[2:]}):
        problems.append(f"{shape}: in the README, not in {results / slug}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="results folder (default results/)")
    ap.add_argument("--gpu", help="a results folder name, e.g. nvidia-h200 (default: every one)")
    ap.add_argument("--check", type=Path, metavar="README", help="exit 1 when this file's table differs")
    args = ap.parse_args()
    slugs = [args.gpu] if args.gpu else gpu_dirs(args.results)
    if args.gpu and args.gpu not in gpu_dirs(args.results):
        print(f"readme_tables: no results for {args.gpu} under {args.results}", file=sys.stderr)
        return 2
    failed = False
    for slug in slugs:
        if args.check:
            diffs = check(args.check, args.results, slug)
            for d in diffs:
                print(f"{slug}: {d}")
            failed = failed or bool(diffs)
            if not diffs:
                print(f"{slug}: the README's table matches {args.results / slug}")
        else:
            print(f"{gpu_name(args.results, slug)} ({slug}):\n")
            print("\n".join(table(args.results, slug)))
            print(f"\n{summary(args.results, slug)}\n")
            tiers = tier_table(args.results, slug)
            if tiers:
                print("\n".join(tiers))
                print(f"\n{summary(args.results, slug, tiers=True)}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
