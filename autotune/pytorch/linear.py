"""`Linear`, a drop-in `nn.Linear` whose product is `autotune::matmul`, and `swap_linear`.

`Linear`'s forward runs x @ W^T (+ bias) through the tuned kernel (`autotune.pytorch.mm`: the
operator under torch.compile, its short eager road otherwise), leading batch axes folded into M.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .fast import compiled_linear_is_torch, linear, mm

# Whether autocast is on for any device: a call of no argument, cheaper than asking for x's device
# (a layer's host time is what the eager road saves), where torch has it.
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", None) or (lambda: True)

# Devices whose layers swap_linear takes: CUDA runs the tuned kernels, the CPU torch's product
# (a model swapped on the CPU and moved to the GPU afterwards is served there).
_DEVICES = ("cuda", "cpu")


class Linear(nn.Linear):
    """y = x @ W^T + b through autotune's tuned SGEMM; a drop-in for `nn.Linear`.

    Its parameters, initialisation, state_dict keys and repr are nn.Linear's; the backward pass
    is the operator's own (dX = dY W is "nn", dW = dY^T X is "tn"; no operand copied).

    Inside an autocast region it is nn.Linear (torch's reduced-precision product, as asked);
    float16 or bfloat16 inputs outside one are a TypeError, never cast. A layer shape's first
    strict-FP32 step (eager, or compiled with static shapes: timed while traced) is timed on
    autotune's kernels and on torch's F.linear, host time included, and the faster kept (small
    layers are host time: see pytorch/route.py).

    Args:
        in_features, out_features, bias, device, dtype: as for nn.Linear.
        precision: the tier the product may run at ("highest": strict FP32; "high", "medium":
            the kernels searched for them; see autotune.matmul).
    """

    precision: str = "highest"  # a class default, so a layer swapped in place (swap_linear) has it

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, precision="highest"):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.precision = precision

    def forward(self, x: Tensor) -> Tensor:
        """Return x @ W^T (+ bias), the weight read in place as the "nt" operand."""
        # The weight is stored out x in, the layout a linear layer's kernels are tuned for.
        if _any_autocast() and torch.is_autocast_enabled("cuda" if x.is_cuda else x.device.type):
            # Autocast asks for torch's reduced-precision product, which autotune's strict-FP32
            # kernels are not: the layer is nn.Linear inside such a region, by design.
            return super().forward(x)
        matrix = x.dim() == 2
        # reshape is a view for any x whose leading axes fold into one stride (every contiguous
        # x): the product reads it in place as an M x in matrix.
        x2 = x if matrix else x.reshape(-1, x.shape[-1])
        y = linear(x2, self.weight, self.bias, self.precision)
        if y is None and compiled_linear_is_torch(x2, self.weight, self.bias, self.precision):
            y = F.linear(x2, self.weight, self.bias)
        elif y is None:  # the operator's road (torch.compile and the like): a product, then an add
            y = mm(x2, self.weight, False, True, 1.0, self.precision)
            if self.bias is not None:
                y = y + self.bias  # one fused add under torch.compile
        return y if matrix else y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, precision={self.precision}"


class Swapped(list):
    """The names of the layers swap_linear swapped (a list), with `skipped`: name -> why not."""

    def __init__(self, names: list[str], skipped: dict[str, str]):
        super().__init__(names)
        self.skipped = skipped

    def __str__(self) -> str:
        lines = [f"autotune Linear: {', '.join(self) or 'no layer'}"]
        lines += [f"kept as it is: {name} ({why})" for name, why in self.skipped.items()]
        return "\n".join(lines)


def why_not(layer: nn.Module) -> str | None:
    """Why swap_linear leaves this module as it is, or None when it swaps it."""
    if type(layer) is not nn.Linear:
        # Subclasses have forwards of their own (LoRA, quantised, parametrised layers,
        # MultiheadAttention's out_proj that it never calls): replacing theirs would change the model.
        return f"a {type(layer).__name__}, not a plain nn.Linear"
    w = layer.weight
    if w.dtype != torch.float32:
        return f"{w.dtype} weights: autotune runs float32 only"
    if w.device.type not in _DEVICES:
        return f"on {w.device}: autotune runs on CUDA (and the CPU through torch)"
    if layer.bias is not None and (layer.bias.dtype != w.dtype or layer.bias.device != w.device):
        return "bias and weight differ in dtype or device"
    return None


def swap_linear(model: nn.Module, precision: str = "highest") -> Swapped:
    """Make each float32 `nn.Linear` of `model` (on CUDA or the CPU) an autotune `Linear`, in place.

    The layer object is kept -- its parameters, hooks, training mode and state_dict keys
    stay as they are -- and only its forward changes, so optimizers already built still hold its
    parameters. Half-precision layers, layers on other devices and subclasses of nn.Linear are
    left alone.

    Args:
        model: the module to change (itself too, when it is an nn.Linear).
        precision: the tier the swapped layers run at.

    Returns:
        The names swapped (a list, as model.named_modules() names them; "" for model itself),
        with `.skipped`: each nn.Linear (or subclass) not swapped -> why.
    """
    names, skipped = [], {}
    for name, layer in model.named_modules():
        if not isinstance(layer, nn.Linear) or isinstance(layer, Linear):
            continue
        why = why_not(layer)
        if why is not None:
            skipped[name] = why
            continue
        layer.__class__ = Linear  # same instance, new forward: nothing re-registered or copied
        layer.precision = precision
        names.append(name)
    return Swapped(names, skipped)
