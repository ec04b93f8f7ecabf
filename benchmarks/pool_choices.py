"""The dispatch's choice at shapes nobody tuned with the candidate pool of before and of now, on the CPU.

    python benchmarks/pool_choices.py                  # the H100 folder, the example's 24 shapes, 16 batches
    python benchmarks/pool_choices.py --gpu nvidia-h200 --batches 30 --seed 1

Before: the records of the call's layout and batching, else of its layout, else all, each
prediction as measured. Now (dispatch/table.py `_Table._pool`): the records of the call's layout and
batching, then every other record, a prediction from another layout or batching surcharged by
model.foreign. For each shape: the config chosen, and the model's
predicted time of it (us), before and now. Nothing is timed: what a choice runs at needs the device
(examples/sgemm_dispatch.cu with each side's header, benchmarks/untuned.py).

The unbatched shapes are examples/sgemm_dispatch.cu's draw (seed 57, 24), read from the log of its
run with the H100 folder's header (its column-major (m, n, k, op) is the row-major (n, m, k) with
the transposes swapped); the "was us" column is what that header's kernel measured there (an H200)
and cuBLAS's. The batches are a seeded draw of attention's QK^T (nt) and PV (nn) for common head
sizes, and of many small matrices, with the four of the issue that found them 0.28-0.60x cupy.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Problem
from autotune.dispatch import model
from autotune.dispatch import table as dispatch_table
from autotune.kernels.limits import profile_for_arch

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "benchmarks/logs/run236-240-h200/dispatch_h100header_run240.txt"
KNOWN_BATCHES = ["384x384x64_b96", "384x64x384_b96", "64x64x64_b512", "1024x1024x128_b12"]


def drawn_shapes(raw: Path) -> list[tuple[Problem, str]]:
    """Return the example's shapes as row-major problems, with what the log says of each."""
    out = []
    for line in raw.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 9 and parts[1] == "x" and parts[3] == "x" and parts[5] in ("NN", "NT", "TN", "TT"):
            m, n, k, op = int(parts[0]), int(parts[2]), int(parts[4]), parts[5].lower()
            # cuBLAS's C = op(A) op(B), column-major, is C^T = op(B)^T op(A)^T row-major.
            note = f"{float(parts[6]):.0f}/{float(parts[7]):.0f}"
            out.append((Problem(n, m, k, op[1] + op[0]), note))
    return out


def drawn_batches(seed: int, count: int) -> list[Problem]:
    """Return a seeded draw of attention QK^T (nt) and PV (nn) batches and of many small matrices."""
    rng = random.Random(seed)
    out = [Problem.parse(s) for s in KNOWN_BATCHES]
    while len(out) < count:
        kind = rng.choice(["qk", "pv", "small"])
        if kind == "small":
            m, n, k = (rng.choice([8, 16, 24, 32, 48, 64, 96, 128]) for _ in range(3))
            out.append(Problem(m, n, k, batch=rng.choice([256, 1024, 4096])))
            continue
        heads = rng.choice([12, 16, 32, 96]) * rng.choice([1, 2, 8])
        seq, d = rng.choice([128, 197, 256, 512, 1024, 2048]), rng.choice([64, 80, 128])
        if kind == "qk":  # Q (seq x d) @ K^T: K stored (seq x d), read transposed
            out.append(Problem(seq, seq, d, "nt", heads))
        else:  # softmax(QK^T) (seq x seq) @ V (seq x d)
            out.append(Problem(seq, d, seq, "nn", heads))
    return out


def old_pool(self, problem: Problem) -> list:
    """The pool before: the records of the layout and batching, else of the layout, else all."""
    batched = problem.batch > 1
    same = [(shape, fams) for shape, fams in self.records if shape.layout == problem.layout]
    alike = [(shape, fams) for shape, fams in same if (shape.batch > 1) == batched]
    return alike or same or self.records


def choice(table, problem: Problem, limits, before: bool) -> tuple[str, float]:
    """Return (config name, predicted us) that the model gives `problem`, with the pool of before or now."""
    pool, weight = dispatch_table._Table._pool, model.FOREIGN_WEIGHT
    if before:  # the old pool, and every prediction as measured (a factor of 1.0 changes no bit)
        dispatch_table._Table._pool, model.FOREIGN_WEIGHT = old_pool, 0.0
    try:
        found = table.choose(problem, None, limits)
    finally:
        dispatch_table._Table._pool, model.FOREIGN_WEIGHT = pool, weight
    if found is None:
        return "(fallback)", math.nan
    _, _, cfg, ms = found
    return cfg.name, math.nan if ms is None else 1e3 * ms


def short(name: str) -> str:
    """Return a config's name cut to the parameters that tell configs apart at a glance."""
    keep = ("BM", "BN", "BK", "TILE", "MR", "NR", "SPLITK", "KCHUNK", "TM", "TN")
    fam, *params = name.split("_")
    picked = [p for p in params if any(p.startswith(k) and p[len(k) :].isdigit() for k in keep)]
    return "_".join([fam, *picked])[:40]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", default="nvidia-h100-80gb-hbm3", help="the results folder's GPU (default H100)")
    ap.add_argument("--results", type=Path, default=ROOT / "results")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--seed", type=int, default=58, help="the batches' draw (default 58)")
    ap.add_argument("--batches", type=int, default=16, help="batched shapes, the issue's four first")
    args = ap.parse_args()
    table = dispatch_table.table_for(args.results, args.gpu)
    limits = profile_for_arch(args.arch)
    rows = drawn_shapes(RAW) + [(p, "") for p in drawn_batches(args.seed, args.batches)]
    print(f"{'row-major shape':>22} {'was us':>11}  {'before':<40} {'us':>8}  {'now':<40} {'us':>8}")
    ratios = []
    for p, note in rows:
        (a, ta), (b, tb) = choice(table, p, limits, True), choice(table, p, limits, False)
        ratios.append(tb / ta)
        same = "(same)" if a == b else short(b)
        print(f"{p.name:>22} {note:>11}  {short(a):<40} {ta:8.1f}  {same:<40} {tb:8.1f}")
    changed = sum(1 for p, _ in rows if choice(table, p, limits, True)[0] != choice(table, p, limits, False)[0])
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"{changed} of {len(rows)} choices changed; predicted us now / before: geomean {geo:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
