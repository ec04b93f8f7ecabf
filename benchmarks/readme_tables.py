"""The results page, results/README.md, from the stored records: print it, write it, or check it.

    python benchmarks/readme_tables.py                                   # print the tables
    python benchmarks/readme_tables.py --write results/README.md         # regenerate the page's tables
    python benchmarks/readme_tables.py --check results/README.md         # exit 1 if they differ (CI)

The page's tables lie between two marker lines (BEGIN, END); --write replaces what is between
them and leaves the rest of the page alone, --check prints a diff of what differs. One section a
GPU folder under results/: where and with what its records were measured (the records' own
versions and dates), then one row per stored strict-FP32 shape (`<gpu>/<M>x<N>x<K>.json`), in
the order of the shape sweep (benchmarks/sweep.py), then any others by size: the winning
config's schedule, its TFLOP/s, cuBLAS's from the same process, the ratio (three decimals where
two would read 1.00) and the relative error. Records of the precision tiers (`..._high.json`,
`..._medium.json`) make a second table (TIER_HEADER): the tier's bar is cuBLAS SGEMM for high
and cuBLAS with TF32 products for medium, and the speed is also given against SGEMM.
"""

from __future__ import annotations

import argparse
import ast
import difflib
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
    the tensor cores' for the tensor-core families; params for other families (but the layout and
    the batch, which the shape column already says)."""
    p, family = entry["config"]["params"], entry["config"]["family"]
    if family in ("wgmma_tf32", "mma_tf32"):
        tile = f"{p['BM']}x{p['BN']}" + (f"x{p['BK']}" if "BK" in p else "")
        acc = "summed on the tensor cores" if p.get("ACC") == "tc" else "FP32 sums"
        extra = [f"split-K {p['SPLITK']}"] if p.get("SPLITK", 1) > 1 else []
        extra += ["operands read in place"] if p.get("DIRECT") else []
        return ", ".join([f"{family} {tile}", f"{p['STAGES']} stages", acc, *extra])
    if family != "warptile":
        shown = sorted((k, v) for k, v in p.items() if k not in ("TRANS_A", "TRANS_B", "BATCHED"))
        return f"{family} " + " ".join(f"{k}={v}" for k, v in shown)
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
    if p.get("PACKA", 0) and (problem.M if p.get("TRANS_A", 0) else problem.K) % 4:
        parts.append("A packed")
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
        f"{'cuBLAS' if tier == 'highest' else 'its bar'}, lowest {min(r):.3f}x, {len(r)} shape"
        f"{'s' if len(r) != 1 else ''}"
        for tier, r in groups.items()
    )
    return text[:1].upper() + text[1:]


def gpu_name(results: Path, slug: str) -> str:
    return next((rec["gpu"]["name"] for _p, rec in iter_records(results, slug)), slug)


BEGIN = "<!-- BEGIN tables generated by: python benchmarks/readme_tables.py --write results/README.md -->"
END = "<!-- END generated tables -->"
VERSIONS = (("cuda_driver", "CUDA driver"), ("cuda_runtime", "runtime"), ("nvrtc", "NVRTC"), ("cupy", "CuPy"))


def provenance(results: Path, slug: str) -> str:
    """'`<slug>/`: N records, measured <first> to <last> (CUDA driver ..., CuPy ...)', from the
    records' best entries (what the tables show)."""
    records = [rec for _p, rec in iter_records(results, slug)]
    entries = [rec["families"][rec["best"]] for rec in records if rec["best"] is not None]
    dates = sorted(str(e["date"])[:10] for e in entries if e.get("date"))
    when = "" if not dates else f", measured {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
    versions = []
    for key, label in VERSIONS:
        seen = sorted({str(e.get("versions", {}).get(key)) for e in entries if e.get("versions", {}).get(key)})
        if seen:
            versions.append(f"{label} {' / '.join(seen)}")
    return f"`{slug}/`: {len(records)} records{when}" + (f" ({', '.join(versions)})" if versions else "") + "."


def section(results: Path, slug: str) -> list[str]:
    """One GPU's part of the page: its heading, where its records come from, and its tables."""
    lines = [f"## {gpu_name(results, slug)}", "", provenance(results, slug), ""]
    lines += ["### Strict FP32, cuBLAS in the same process", "", f"{summary(results, slug)}.", ""]
    lines += [*table(results, slug), ""]
    tiers = tier_table(results, slug)
    if tiers:
        lines += ["### Precision tiers, each against its bar", "", f"{summary(results, slug, tiers=True)}.", ""]
        lines += [*tiers, ""]
    return lines


def block(results: Path, slugs: list[str]) -> str:
    """What lies between the page's markers: every GPU's section."""
    lines = [BEGIN, ""]
    for slug in slugs:
        lines += section(results, slug)
    return "\n".join([*lines, END]) + "\n"


def _between(text: str) -> tuple[int, int] | None:
    """Where the generated block starts and ends in `text` (END's line included), or None."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return start, text.index("\n", end) + 1 if "\n" in text[end:] else len(text)


def check(page: Path, results: Path, slugs: list[str] | None = None) -> list[str]:
    """What differs between the page's generated block and the stored results, as diff lines
    (empty: none)."""
    text = page.read_text()
    span = _between(text)
    if span is None:
        return [f"{page}: no generated block (the lines {BEGIN!r} and {END!r})"]
    want = block(results, gpu_dirs(results) if slugs is None else slugs)
    have = text[span[0] : span[1]]
    if have == want:
        return []
    diff = difflib.unified_diff(have.splitlines(), want.splitlines(), f"{page}", f"{results}", lineterm="", n=0)
    return list(diff)


def write(page: Path, results: Path) -> None:
    """Replace the page's generated block with the stored results' tables."""
    text = page.read_text()
    span = _between(text)
    if span is None:
        raise SystemExit(f"readme_tables: {page} has no generated block (the lines {BEGIN!r} and {END!r})")
    page.write_text(text[: span[0]] + block(results, gpu_dirs(results)) + text[span[1] :])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="results folder (default results/)")
    ap.add_argument("--gpu", help="print only this results folder's tables, e.g. nvidia-h200")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", type=Path, metavar="PAGE", help="exit 1 when this page's tables differ")
    mode.add_argument("--write", type=Path, metavar="PAGE", help="replace this page's tables")
    args = ap.parse_args()
    if args.gpu and args.gpu not in gpu_dirs(args.results):
        print(f"readme_tables: no results for {args.gpu} under {args.results}", file=sys.stderr)
        return 2
    if args.check:
        diffs = check(args.check, args.results)
        print("\n".join(diffs) if diffs else f"{args.check}: its tables match {args.results}")
        if diffs:
            print(f"regenerate: python benchmarks/readme_tables.py --write {args.check}")
        return 1 if diffs else 0
    if args.write:
        write(args.write, args.results)
        print(f"wrote the tables of {', '.join(gpu_dirs(args.results))} into {args.write}")
        return 0
    slugs = [args.gpu] if args.gpu else gpu_dirs(args.results)
    print("\n".join(line for slug in slugs for line in section(args.results, slug)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
