"""Cold searches (no seeds) against the best known config, the way a cold-search goal is stated.

    python benchmarks/cold_search.py --shapes 4096,2048 --seeds 0,1,2,3,4 --family warptile \
        --stored results/nvidia-h100-80gb-hbm3 --reference references.json --out cold/

Each search is `autotune search --no-seeds --seed S` (or with `--variant ARGS`, repeatable, those
search arguments in place of `--no-seeds`: e.g. "" for the seeded search, "--no-seeds --priors
results/nvidia-h100-80gb-hbm3" for another GPU's records as priors) in its own process, with a
fresh results folder and a fresh compile cache (a GPU nobody tuned for has neither), timed by the wall clock
around the whole command: start-up, enumeration, compiles, trials and the final re-time. Then,
per shape and in one process, every search's best config and the best known configs (the
stored record's, and those of a `--reference` file: {shape name: [{"family": F, "params": {...}}]})
are re-timed back to back by the same evaluator, with cuBLAS: a search's fraction is its
config's re-timed GFLOP/s over the best re-timed reference's, and its strict fraction over the
best of everything re-timed (where a search beat the best known, the others are held to it).
Rows are written as they come.

The searches and the re-time can run apart (searches spread over GPUs or device calls):
`--search-only` writes the rows and stops; `--rows FILE [FILE ...]` re-times earlier rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Config, Problem
from autotune.records.results import load_record
from autotune.search.evaluate import GPUEvaluator


def search(problem: Problem, seed: int, families: list[str], trials: int | None, work: Path, variant: str) -> dict:
    """One search in a subprocess: its wall time and each family's best (config, GFLOP/s)."""
    results, cache = work / "results", work / "cache"
    cmd = [sys.executable, "-m", "autotune", "search", "--m", str(problem.M), "--n", str(problem.N)]
    cmd += ["--k", str(problem.K), *shlex.split(variant), "--seed", str(seed), "--results", str(results), "--quiet"]
    cmd += ["--family", *families] if families else []
    cmd += ["--trials", str(trials)] if trials else []
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env={**os.environ, "AUTOTUNE_CACHE": str(cache)}, capture_output=True, text=True)
    wall = time.monotonic() - t0
    row = {"problem": problem.name, "variant": variant, "seed": seed, "wall_s": wall, "rc": proc.returncode}
    row["command"] = " ".join(cmd[1:])
    files = list(results.glob(f"*/{problem.name}.json"))
    if proc.returncode or not files:
        row["error"] = (proc.stderr or proc.stdout)[-2000:]
        return row
    record = load_record(files[0])  # each entry whole, whichever form the file is in
    row["best_family"] = record["best"]
    row["families"] = {
        f: {"config": e["config"]["params"], "gflops": e["gflops"], "ratio": e.get("ratio")}
        | {"seconds": e["search"]["seconds"], "evaluated": e["search"].get("evaluated")}
        for f, e in record["families"].items()
        if e.get("status") == "ok"
    }
    return row


def references(problem: Problem, path: Path | None, stored: Path | None) -> list[Config]:
    out = []
    record = stored / f"{problem.name}.json" if stored else None
    if record is not None and record.is_file():
        best = load_record(record)
        fam = best["best"]
        out.append(Config.make(fam, best["families"][fam]["config"]["params"]))
    if path is not None:
        out += [Config.make(r["family"], r["params"]) for r in json.loads(path.read_text()).get(problem.name, [])]
    return out


def retime(problem: Problem, rows: list[dict], refs: list[Config]) -> dict:
    """Every search's best and the best known configs re-timed back to back in one process, with
    cuBLAS; each row gains its fractions of the best known and of the best re-timed."""
    found = [Config.make(f, e["config"]) for r in rows for f, e in r.get("families", {}).items()]
    ev = GPUEvaluator()
    try:
        # By name: a stored config may spell out layout parameters a search's leaves to their defaults.
        unique = list({c.name: c for c in refs + found}.values())
        measured = ev.evaluate(unique, problem, retime=True)
        base = ev.baseline(problem)
    finally:
        ev.close()
    by_name = {m.config.name: m.gflops if m.ok else 0.0 for m in measured}
    known = max(by_name[c.name] for c in refs) if refs else float("nan")
    seen = max(by_name.values())
    for r in rows:
        fams = r.get("families", {})
        best = max((by_name[Config.make(f, e["config"]).name] for f, e in fams.items()), default=0.0)
        r.update(retimed_gflops=best, fraction=best / known, strict_fraction=best / seen)
        r.update(x_cublas=best / base["gflops"])
    return {
        "problem": problem.name,
        "cublas_gflops": base["gflops"],
        "best_known_gflops": known,
        "best_retimed_gflops": seen,
        "references": {c.name: by_name[c.name] for c in refs},
        "searches": rows,
    }


def summarise(problem: Problem, rows: list[dict], known: float, cublas: float) -> list[str]:
    """A line per variant: the searches' fractions of the best known config and their wall times."""
    out = []
    for variant in dict.fromkeys(r.get("variant", "--no-seeds") for r in rows):
        mine = [r for r in rows if r.get("variant", "--no-seeds") == variant]
        fr = [r["fraction"] for r in mine if "fraction" in r]
        st = [r["strict_fraction"] for r in mine if "strict_fraction" in r]
        walls = [r["wall_s"] for r in mine]
        out.append(
            f"{problem.name} [{variant}]: fraction of best known mean {sum(fr) / len(fr):.3f} min {min(fr):.3f} "
            f"({' '.join(f'{x:.3f}' for x in fr)}); of the best re-timed mean {sum(st) / len(st):.3f} min "
            f"{min(st):.3f}; wall {min(walls):.0f}-{max(walls):.0f} s; best known "
            f"{known:.0f} GFLOP/s = {known / cublas:.3f}x cuBLAS"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096,2048,8192x8192x1024")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--family", nargs="*", default=[], help="families to search (default: all, as `search`)")
    ap.add_argument("--trials", type=int, help="per family (default: search's)")
    ap.add_argument("--reference", type=Path, help='best known configs: {shape: [{"family": F, "params": {...}}]}')
    ap.add_argument("--stored", type=Path, help="the results/<gpu> folder of the best stored records")
    ap.add_argument(
        "--rows", type=Path, nargs="+", help="no searches: re-time the searches of earlier runs' searches.jsonl"
    )
    ap.add_argument("--search-only", action="store_true", help="write the searches' rows, re-time nothing")
    ap.add_argument("--variant", action="append", help='search arguments, not --no-seeds (repeatable; "": seeded)')
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "searches.jsonl"
    summary = []
    for text in args.shapes.split(","):
        problem = Problem.parse(text)
        rows = []
        for path in args.rows or []:
            rows += [r for r in map(json.loads, path.read_text().splitlines()) if r["problem"] == problem.name]
        variants = args.variant if args.variant is not None else ["--no-seeds"]
        runs = [] if args.rows else [(v, int(s)) for v in variants for s in args.seeds.split(",")]
        for variant, seed in runs:
            work = args.out / "work" / f"{problem.name}_v{variants.index(variant)}_s{seed}"
            row = search(problem, seed, args.family, args.trials, work, variant)
            rows.append(row)
            with rows_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            best = row.get("families", {}).get(row.get("best_family"), {})
            print(f"{problem.name} [{variant}] seed {seed}: {row['wall_s']:.0f} s, {best.get('evaluated')} measured, "
                  f"best {best.get('gflops', 0):.0f} GFLOP/s ({row.get('best_family')}) {row.get('error', '')[:200]}",
                  flush=True)  # fmt: skip
        if args.search_only:
            continue
        doc = retime(problem, rows, references(problem, args.reference, args.stored))
        (args.out / f"cold_{problem.name}.json").write_text(json.dumps(doc, indent=1))
        for line in summarise(problem, rows, doc["best_known_gflops"], doc["cublas_gflops"]):
            summary.append(line)
            print(line, flush=True)
    (args.out / "summary.txt").write_text("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
