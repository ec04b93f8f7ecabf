"""Which stored kernels read what lies past K in a row (a padded row pitch, NaN there): each form
the dispatch can choose (as `autotune fuzz` covers them), at a few small shapes with A's and B's
rows padded with NaN, integer data (the result must be exact). Prints the kernels that are wrong,
by family, and a table.

    python benchmarks/padding_probe.py [--results DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.types import Problem
from autotune.dispatch import fuzz
from autotune.dispatch.api import _device_limits, _device_props, fallback_config
from autotune.dispatch.table import _table

SHAPES = [(2, 1, 1), (5, 3, 7), (67, 45, 33), (3, 130, 5)]
PADS = [((3, 3, 0), (0, 0, 0)), ((5, 1, 0), (1, 2, 0))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    args = ap.parse_args()
    from autotune.dispatch.fuzz.device import Executor

    slug, arch = _device_props(0)
    records = _table(str(args.results), slug).records  # as autotune.matmul reads them
    forms = fuzz.coverage(records, [(Problem(777, 555, 333), fallback_config(arch))], 0, 1, _device_limits(0, arch))
    calls = []
    for form in forms:
        for m, n, k in SHAPES:
            for pads, offsets in PADS:
                lead = form.lead_a
                calls.append(dataclasses.replace(form, M=m, N=n, K=k, lead_a=lead, lead_b=lead, pads=pads,
                                                 offsets=offsets, data="ints", alpha=1.0, beta=0.0))  # fmt: skip
    ex = Executor()
    bad = collections.defaultdict(set)
    ran = collections.Counter()
    for case, outcome in ex.run(calls):
        fam = case.config["family"]
        name = case.kernel.name
        ran[fam] += 1
        if not outcome.ok:
            bad[fam].add(name)
            print(f"WRONG {name} {case.layout} {case.M}x{case.N}x{case.K} pads {case.pads} offsets {case.offsets}: "
                  f"{outcome.reason}", flush=True)  # fmt: skip
            if outcome.fatal:
                break
    print(f"{'family':<12} {'problems':>9} {'kernels wrong':>14}")
    for fam in sorted(ran):
        print(f"{fam:<12} {ran[fam]:>9} {len(bad[fam]):>14}")
    print(f"padding probe on {slug}: {sum(len(v) for v in bad.values())} kernel forms wrong of {len(forms)}")
    return 1 if any(bad.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
