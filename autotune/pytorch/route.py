"""Which road a linear layer's eager step takes: autotune's kernels, or torch's own F.linear.

A small layer's step is host time: torch's C++ F.linear and its autograd node cost less than
autotune's Python road whatever the kernels gain. A layer shape's first eager step (strict FP32,
TF32 off, as torch's product then is) times the whole step both ways, host time included, and
keeps the faster. A step longer than LONG_MS is timed one step a round, which bounds what the
timing costs a large layer; it is timed all the same, since a layer's step is more than its
products (the bias, the gradients' sum, the nodes) and the first single step runs slow.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..dispatch import measure

# A step that long is timed one step a round, not REPS: its host time is a few percent of it at
# most. Shorter steps are timed back to back, as a training loop runs them: a single synchronised
# step measures latency, which ranks the roads otherwise where the host time is most of a step.
LONG_MS = 10.0
ROUNDS, REPS = 3, 6  # interleaved rounds of back-to-back steps; each road's least time kept

# Layer key -> whether torch's F.linear ran its step faster. The key holds what changes either
# road's cost: the device, the shapes, x's contiguity, the bias and which gradients are recorded.
_TORCH_FASTER: dict[tuple, bool] = {}
_tf32 = torch._C._get_cublas_allow_tf32
_capturing = torch.cuda.is_current_stream_capturing
_sync = torch.cuda.synchronize
_torch_road = F.linear  # what the caller runs where this says torch is faster


def torch_is_faster(x: Tensor, weight: Tensor, bias: Tensor | None, grads: tuple, ours: Callable) -> bool:
    """Return whether torch's F.linear runs this layer's step faster than `ours` (timed once a key).

    Args:
        x, weight, bias: the layer's call (x a matrix, on a CUDA device).
        grads: which of x, weight, bias have a gradient recorded (all False without autograd).
        ours: ours(x, weight, bias) -> y, autotune's road for the same call.
    """
    try:
        if _tf32():  # torch's product would be TF32: not the strict-FP32 layer asked for
            return False
    except RuntimeError:  # torch's legacy and new precision settings mixed: it cannot say
        return False
    key = (x.get_device(), *x.shape, weight.shape[0], bias is None, x.is_contiguous(), *grads)
    faster = _TORCH_FASTER.get(key)
    if faster is None:
        # No timing inside a CUDA graph capture, or where first calls are told not to time.
        if measure.kernels_to_time() == 0 or _capturing():
            return False
        faster = _TORCH_FASTER[key] = _time_both(x, weight, bias, grads, ours)
    return faster


def _time_both(x: Tensor, weight: Tensor, bias: Tensor | None, grads: tuple, ours: Callable) -> bool:
    """Return whether F.linear's step (forward; backward where grads) beats `ours` on the clock."""
    # Detached copies of the call's tensors: the timed backward passes leave the caller's grads alone.
    calls = zip((x, weight, bias), grads, strict=True)
    leaves = [None if t is None else t.detach().requires_grad_(g) for t, g in calls]
    dy = None

    def step(road):
        nonlocal dy
        y = road(*leaves)
        if any(grads):
            dy = torch.ones_like(y) if dy is None else dy
            for t in leaves:
                if t is not None:
                    t.grad = None
            y.backward(dy)

    roads = {"ours": ours, "torch": _torch_road}
    step(ours)  # first calls: our GEMMs choose and compile; what ours refuses, the caller hears
    try:
        step(_torch_road)  # and cuBLAS warms up
    except Exception:  # noqa: BLE001 - what torch's road cannot run (memory, a check) stays ours
        return False
    best = dict.fromkeys(roads, float("inf"))
    reps = 1  # one step each first: a long one is timed one step a round
    for r in range(ROUNDS):
        for name in sorted(roads, reverse=r % 2 == 1):  # each road first in turn
            road = roads[name]
            _sync(x.device)
            start = time.perf_counter()
            for _ in range(reps):
                step(road)
            _sync(x.device)
            best[name] = min(best[name], (time.perf_counter() - start) / reps)
        if r == 0 and max(best.values()) <= LONG_MS / 1e3:
            reps = REPS
    return best["torch"] < best["ours"]


def forget() -> None:
    """Drop every layer's timed road (tests; a layer's next eager step is timed again)."""
    _TORCH_FASTER.clear()
