"""Linear layers at a seeded draw of shapes and at the example's, autotune's Linear against nn.Linear.

Torch runs in the same process, in strict FP32 (TF32 off). Tune what the layers call, as a user
would (record the GEMMs, search them), then time forward + backward:

    python benchmarks/pytorch_linear.py --record shapes.txt     # one forward + backward of each layer
    autotune search --shapes-file shapes.txt --timeout 10       # tune the GEMMs recorded
    python benchmarks/pytorch_linear.py --out linear.json       # the layers timed, eager and compiled

The draw: rows (batch x tokens) log-uniform in 128..16384, in and out features log-uniform in
64..8192, three in four of them rounded to a multiple of 64 as models' widths mostly are.
A layer's time is pytorch_layer.py's step_ms: the median of ITERS forward + backward steps (CUDA
events), each alone; "back to back" is its steps_ms, steps as a training loop runs them. ROUNDS
rounds alternate which goes first, and the speedup's spread is over the rounds. "road" is the
one Linear's eager training step took (torch's F.linear where its first step timed faster).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from pytorch_layer import native_ready, step_ms, steps_ms  # the host-time benchmark's timers and C++ road
from torch import nn

from autotune.pytorch import Linear, record_shapes, route

ROUNDS = 5
EXAMPLE = [(512, 64, 256), (512, 256, 256), (512, 256, 10)]  # examples/pytorch_mlp.py's layers


def _features(rng: random.Random) -> int:
    f = 2 ** rng.uniform(6, 13)
    return max(64, round(f / 64) * 64) if rng.random() < 0.75 else int(f)


def draw(seed: int, count: int) -> list[tuple[int, int, int]]:
    """`count` (rows, in_features, out_features) of linear layers, drawn with `seed`."""
    rng = random.Random(seed)
    return [(int(2 ** rng.uniform(7, 14)), _features(rng), _features(rng)) for _ in range(count)]


def _layers(rows: int, fin: int, fout: int):
    torch.manual_seed(rows * 31 + fin * 7 + fout)
    ref = nn.Linear(fin, fout).cuda()
    ours = Linear(fin, fout).cuda()
    ours.load_state_dict(ref.state_dict())
    x = torch.rand(rows, fin, device="cuda", requires_grad=True)
    return ref, ours, x


def check(ref, ours, x) -> float:
    """Relative error of the forward against torch's FP32 (the answer, not only the time)."""
    with torch.no_grad():
        want, got = ref(x), ours(x)
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def measure(shape: tuple[int, int, int]) -> dict:
    """One layer's times, eager and compiled, torch's and autotune's, over ROUNDS rounds."""
    torch._dynamo.reset()  # each shape compiles afresh: no recompile limit reached over the draw
    ref, ours, x = _layers(*shape)
    compiled = (torch.compile(ref, fullgraph=True), torch.compile(ours, fullgraph=True))
    forms = {"eager": (ref, ours), "compiled": compiled, "back to back": (ref, ours)}
    row = {"shape": list(shape), "rel_err": check(ref, ours, x)}
    for form, (r, o) in forms.items():
        timer = steps_ms if form == "back to back" else step_ms
        speedups, t_ref, t_ours = [], [], []
        for i in range(ROUNDS):
            # Each side first in turn, as the GPU's clock and caches are left by what ran before:
            # compiled steps of the very same kernels came out 0.82x and 1.04x.
            if i % 2 == 0:
                a, b = timer(r, x), timer(o, x)
            else:
                b, a = timer(o, x), timer(r, x)
            t_ref.append(a)
            t_ours.append(b)
            speedups.append(a / b)
        row[form] = {
            "torch_ms": round(statistics.median(t_ref), 4),
            "autotune_ms": round(statistics.median(t_ours), 4),
            "speedup": round(statistics.median(speedups), 3),
            "spread": [round(min(speedups), 3), round(max(speedups), 3)],
        }
    # The road the layer's eager training step took (route.py): its first step timed both.
    roads = [faster for key, faster in route._TORCH_FASTER.items() if key[1:4] == shape and all(key[-3:])]
    row["road"] = ("torch" if roads[0] else "autotune") if roads else "untimed"
    return row


def record(shapes, path: Path) -> None:
    """Write the GEMMs of one forward + backward of each layer to `path` (a shapes file)."""
    with record_shapes(path) as log:
        for shape in shapes:
            _, ours, x = _layers(*shape)
            ours(x).sum().backward()
    print(f"{len(log.problems)} GEMMs of {len(shapes)} layers -> {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="the draw's seed")
    p.add_argument("--count", type=int, default=10, help="layers drawn (the example's are added)")
    p.add_argument("--record", type=Path, metavar="FILE", help="instead: record the layers' GEMMs into FILE")
    p.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    drawn = draw(args.seed, args.count)
    if args.record:
        record(EXAMPLE + drawn, args.record)
        return
    print(f"C++ road: {native_ready()}", flush=True)  # not built while layers are timed
    rows = []
    for kind, shapes in (("example", EXAMPLE), ("drawn", drawn)):
        for shape in shapes:
            row = measure(shape) | {"set": kind}
            rows.append(row)
            forms = "  ".join(
                f"{form} {f['torch_ms']:.4f} / {f['autotune_ms']:.4f} ms {f['speedup']:.3f}x {f['spread']}"
                for form, f in ((form, row[form]) for form in ("eager", "compiled", "back to back"))
            )
            print(
                f"{kind:8s} {shape[0]:6d} x {shape[1]:5d} -> {shape[2]:5d}  {forms}  road {row['road']}"
                f"  rel err {row['rel_err']:.1e}",
                flush=True,
            )
    summary = {}
    for kind in ("example", "drawn"):
        for form in ("eager", "compiled", "back to back"):
            s = [r[form]["speedup"] for r in rows if r["set"] == kind]
            gm = math.exp(sum(map(math.log, s)) / len(s))
            summary[f"{kind} {form}"] = {"geomean": round(gm, 3), "min": min(s)}
            print(f"{kind} {form}: geomean {gm:.3f}x, min {min(s):.3f}x over {len(s)} layers")
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "seed": args.seed}
    result |= {"rows": rows, "summary": summary}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
