"""Host time per call of autotune's PyTorch operator against torch's; the layer timers.

Torch runs in the same process, in strict FP32 (TF32 off).

    python benchmarks/pytorch_layer.py --out host.json      # 64^3 operands

host (us per call, small tensors: kernels far shorter than a call): torch `x @ w.T`,
`autotune.matmul` (the Python API), `mm` (autotune.pytorch's eager road), `torch.ops.autotune.matmul`
(the custom operator through the dispatcher), each without and with autograd (x requires grad),
`mm` on the Python road alone (the C++ road, pytorch/native.py, set aside), and nn.Linear against
autotune's Linear; "native" is the C++ road's status, its build waited for first ("ready").
Timed in batches of BATCH calls, a synchronize between batches outside the timed span;
the median batch / BATCH, median of REPEATS interleaved rounds.
step_ms and steps_ms time a layer's forward + backward (pytorch_linear.py times layers by them).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch import nn

import autotune
from autotune.pytorch import Linear, mm, native

BATCH, REPEATS, ITERS = 50, 7, 50


def host_us(fn) -> float:
    """Median host time per call, in microseconds."""
    rounds = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        rounds.append((time.perf_counter() - t0) / BATCH * 1e6)
    return statistics.median(rounds)


def host_calls(n: int) -> dict:
    """The calls host_table times, by name, on n x n operands (kernels chosen and built first)."""
    x = torch.rand(n, n, device="cuda")
    w = torch.rand(n, n, device="cuda")
    xg = x.clone().requires_grad_(True)
    ref, ours = nn.Linear(n, n).cuda(), Linear(n, n).cuda()
    calls = {
        "torch x @ w.T": lambda: x @ w.T,
        "autotune.matmul": lambda: autotune.matmul(x, w, trans_b=True),
        "mm": lambda: mm(x, w, False, True),
        "mm, Python road": lambda: python_road(mm, x, w, False, True),
        "op (dispatcher)": lambda: torch.ops.autotune.matmul(x, w, False, True),
        "torch x @ w.T, grad": lambda: xg @ w.T,
        "mm, grad": lambda: mm(xg, w, False, True),
        "op, grad": lambda: torch.ops.autotune.matmul(xg, w, False, True),
        "nn.Linear": lambda: ref(x),
        "Linear": lambda: ours(x),
    }
    for fn in calls.values():
        for _ in range(20):
            fn()  # the kernel chosen, compiled and checked before timing
    return calls


def python_road(fn, *args):
    """fn(*args) with the C++ road set aside (its attribute read on every call)."""
    served, native.product = native.product, None
    try:
        return fn(*args)
    finally:
        native.product = served


def native_ready() -> str:
    """Start the C++ road and return its status once it is built or loaded (about 25 s the first time)."""
    native.start()
    return native.wait(900)


def host_table(n: int) -> dict[str, float]:
    """Median host time per call of each of host_calls(n), in microseconds."""
    calls = host_calls(n)
    gc.disable()
    try:
        times = {k: [] for k in calls}
        for _ in range(3):  # interleaved rounds: drift in the machine's state meets every call alike
            for k, fn in calls.items():
                times[k].append(host_us(fn))
    finally:
        gc.enable()
    return {k: round(statistics.median(v), 2) for k, v in times.items()}


def step_ms(layer, x) -> float:
    """Median ms of one forward + backward of `layer` on x (CUDA events)."""
    g = torch.rand(x.shape[0], layer.out_features, device="cuda")
    for _ in range(5):
        layer(x).backward(g)
    times = []
    for _ in range(ITERS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        layer(x).backward(g)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def steps_ms(layer, x, count: int = ITERS) -> float:
    """Least ms a step of `count` forward + backward steps back to back (a training loop's pace)."""
    g = torch.rand(x.shape[0], layer.out_features, device="cuda")
    for _ in range(5):
        layer(x).backward(g)
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            layer(x).backward(g)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) * 1e3 / count)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64, help="n of the n x n host-time operands")
    p.add_argument("--out", type=Path, help="also write the figures here as JSON")
    p.add_argument("--profile", metavar="CALL", help="instead: cProfile 5000 calls of CALL (a host-time row's name)")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.profile:
        import cProfile
        import pstats

        fn = host_calls(args.size)[args.profile]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(100):
            for _ in range(BATCH):
                fn()
            torch.cuda.synchronize()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "native": native_ready(),
        "host_us": host_table(args.size),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
