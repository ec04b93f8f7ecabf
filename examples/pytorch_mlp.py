"""Train a small MLP with autotune's Linear under torch.compile, beside torch's own, and compare.

The two loss curves should agree to FP32 rounding.

    python examples/pytorch_mlp.py                  # CUDA if there is one, 300 steps
    python examples/pytorch_mlp.py --steps 50 --no-compile --device cpu

On CUDA the products run autotune's tuned kernels (strict FP32, so torch's TF32 is turned off
for the comparison); on the CPU they run torch's own product, the same model end to end.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

import torch
from torch import nn

from autotune.pytorch import swap_linear


def make_model(width: int = 256) -> nn.Module:
    return nn.Sequential(nn.Linear(64, width), nn.GELU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 10))


def train(model: nn.Module, data, steps: int) -> list[float]:
    """Loss of each step of Adam on the (inputs, targets) batches of `data`, cycled."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def run(steps: int = 300, device: str | None = None, compile: bool = True) -> tuple[list[float], list[float]]:
    """(torch's losses, autotune's losses): the same initial weights and batches.

    Returns:
        The two loss curves, one value a step.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # torch in strict FP32, as autotune's default tier
    torch.manual_seed(0)
    # A fixed teacher labels random inputs: a task the MLP can learn, so the curves move.
    teacher = nn.Linear(64, 10).to(device)
    data = []
    for _ in range(16):
        x = torch.randn(512, 64, device=device)
        data.append((x, teacher(x).argmax(-1).detach()))
    reference = make_model().to(device)
    ours = copy.deepcopy(reference)
    swapped = swap_linear(ours)
    print(f"autotune Linear for layers {', '.join(swapped)}", file=sys.stderr)
    if compile:
        reference, ours = torch.compile(reference, fullgraph=True), torch.compile(ours, fullgraph=True)
    return train(reference, data, steps), train(ours, data, steps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", choices=("cuda", "cpu"))
    p.add_argument("--no-compile", action="store_true", help="eager mode")
    args = p.parse_args()
    want, got = run(args.steps, args.device, not args.no_compile)
    worst = max(abs(a - b) / abs(a) for a, b in zip(want, got, strict=True))
    for step in range(0, args.steps, max(1, args.steps // 10)):
        print(f"step {step:4d}  torch {want[step]:.6f}  autotune {got[step]:.6f}")
    print(f"final loss: torch {want[-1]:.6f}, autotune {got[-1]:.6f}; largest relative gap {worst:.2e}")


if __name__ == "__main__":
    main()
