"""autotune/dispatch/model.py judged on measured candidates, without a GPU: for each shape of a
benchmarks/candidates.py run, the config the model picks and its measured time against cuBLAS,
and the best measured candidate (the bound on any choice).

    # the measured files are in git, not the tree (each 0.35-0.7 MB):
    git show f0bcb97:benchmarks/logs/run70-h100/candidates.json > run70.json
    python benchmarks/judge_model.py run70.json
    python benchmarks/judge_model.py a.json b.json   # two runs' sets, pooled
    python benchmarks/judge_model.py FILE --set SHARING=0.75 --set LAUNCH_US=2   # other constants
    python benchmarks/judge_model.py FILE --grid          # the search its constants were chosen by
    python benchmarks/judge_model.py FILE --measure 3     # a first call timing 3 likeliest and cuBLAS

The candidates are the ones the stored results give (`table._Table._candidates`) that the file
timed: records added after that run are left out, so the choice is among what was measured. To
judge among every config a run timed, read the results folder of its commit:

    git archive a8814ec results/nvidia-h100-80gb-hbm3 | tar -x -C /tmp/r125
    python benchmarks/judge_model.py run125.json --results /tmp/r125/results
--grid ranks constant sets by the geometric mean on the "fit" shapes and shows the other sets
beside them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Config, Problem, name_piece
from autotune.dispatch import model
from autotune.dispatch import table as dispatch_table

# The serial costs off and at their value (320 sets); other values with --set.
GRID = {
    "SHARING": (0.25, 0.5, 0.75, 1.0),
    "DISTANCE_WEIGHT": (0.1, 0.2, 0.3, 0.5, 0.8),
    "LAUNCH_US": (2.0, 4.0),
    "FIXUP_K": (0.0, 8.0),
    "TILE_K": (0.0, 64.0),
    "SPLIT_FIXUP_K": (0.0, 2.0),
}


def timed_name(cfg: Config, ms: dict) -> str | None:
    """Return the name the file timed `cfg` under, or None: a parameter added at 0 since (A_ROWS) is dropped."""
    # A family's parameters at the time of the run are in every one of its names in the file, so
    # dropping a piece matches only a parameter the family gained later.
    if cfg.name in ms:
        return cfg.name
    for key, value in cfg.params:
        if value == 0:
            name = cfg.name.replace(name_piece(key, value), "", 1)
            if name in ms:
                return name
    return None


def judge(table, rows: list[dict], verbose: bool = False) -> tuple[float, float, float, float]:
    """(geometric mean, lowest) of the model's choice and of the best candidate, x cuBLAS."""
    chosen, best = [], []
    for r in rows:
        p, ms = Problem.parse(r["shape"]), r["ms"]
        cands = [c for s, f in table._pool(p) for c in table._candidates(s, f, p, None) if timed_name(c.what[2], ms)]
        pick, predicted = model.fastest(cands, p, table.roof)
        name = timed_name(pick.what[2], ms)
        top = min(v for k, v in ms.items() if k != "cublas")
        chosen.append(ms["cublas"] / ms[name])
        best.append(ms["cublas"] / top)
        if verbose:
            print(f"  {r['shape']:>16}  chosen {chosen[-1]:.2f}x  best {best[-1]:.2f}x  predicted "
                  f"{1e3 * predicted:8.1f} us, measured {1e3 * ms[name]:8.1f} us  {name[:48]}"
                  f" ({pick.problem.name})")  # fmt: skip
    return statistics.geometric_mean(chosen), min(chosen), statistics.geometric_mean(best), min(best)


def judge_measured(table, rows: list[dict], count: int) -> tuple[float, float]:
    """(geometric mean, lowest) x cuBLAS of the fastest of the model's `count` likeliest and cuBLAS."""
    # What dispatch/measure.py keeps at a first call, by the file's times (kernel times alone).
    got = []
    for r in rows:
        p, ms = Problem.parse(r["shape"]), r["ms"]
        cands = [c for s, f in table._pool(p) for c in table._candidates(s, f, p, None) if timed_name(c.what[2], ms)]
        names = list(
            dict.fromkeys(timed_name(c.what[2], ms) for c in sorted(cands, key=lambda c: c.predict_ms(p, table.roof)))
        )
        got.append(ms["cublas"] / min([ms["cublas"]] + [ms[n] for n in names[:count]]))
    return statistics.geometric_mean(got), min(got)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, nargs="+", help="benchmarks/candidates.py outputs (their rows are pooled)")
    ap.add_argument("--results", default="results", help="results folder (default ./results)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a model constant")
    ap.add_argument("--grid", action="store_true", help="rank the constant sets of GRID on the fit shapes")
    ap.add_argument("--measure", type=int, metavar="N", help="also the fastest of N likeliest and cuBLAS")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line a shape")
    args = ap.parse_args()
    datas = [json.loads(f.read_text()) for f in args.files]
    if len({d["device"] for d in datas}) > 1:
        sys.exit("the files were measured on different GPUs")
    table = dispatch_table.table_for(args.results, datas[0]["device"])
    rows = [r for d in datas for r in d["rows"]]
    sets = {name: [r for r in rows if r["set"] == name] for name in dict.fromkeys(r["set"] for r in rows)}
    if args.grid and "fit" not in sets:
        sys.exit("no fit shapes in the files: the constants are chosen on those")
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in GRID:
            sys.exit(f"--set {item}: one of {', '.join(GRID)}")
        setattr(model, name, float(value))
    if args.grid:
        ranked = []
        for values in itertools.product(*GRID.values()):
            for name, v in zip(GRID, values, strict=True):
                setattr(model, name, v)
            others = {n: judge(table, r)[:2] for n, r in sets.items() if n != "fit"}
            ranked.append((judge(table, sets["fit"])[:2], values, others))
        for (fg, fl), values, others in sorted(ranked, key=lambda x: (x[0], x[1]), reverse=True)[:10]:
            consts = " ".join(f"{n} {v:g}" for n, v in zip(GRID, values, strict=True))
            shown = "  ".join(f"{n} {g:.3f}x / lowest {lo:.2f}x" for n, (g, lo) in others.items())
            print(f"fit {fg:.3f}x / lowest {fl:.2f}x  |  {consts}  |  {shown}")
        return 0
    print(" ".join(f"{n} {getattr(model, n):g}" for n in GRID))
    for name, got in sets.items():
        g, lo, bg, blo = judge(table, got, args.verbose)
        print(f"{name}: chosen {g:.3f}x cuBLAS (lowest {lo:.2f}x), best candidate {bg:.3f}x (lowest {blo:.2f}x), "
              f"{len(got)} shapes")  # fmt: skip
        if args.measure:
            mg, mlo = judge_measured(table, got, args.measure)
            print(f"{name}: the fastest of {args.measure} likeliest and cuBLAS {mg:.3f}x (lowest {mlo:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
