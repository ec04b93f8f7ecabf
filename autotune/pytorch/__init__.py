"""autotune in PyTorch models: the custom operator, a drop-in Linear and a recorder of GEMM shapes.

Needs torch (`import autotune` alone does not import it). `mm(a, b, trans_a, trans_b, alpha,
precision)` is the call to use: the custom operator `torch.ops.autotune.matmul` (also
`autotune.pytorch.matmul`) under torch.compile, fake tensors and dispatch modes, the same kernels
at less host cost in eager mode. `Linear`, `swap_linear` and `record_shapes` build on it.
"""

from .fast import mm
from .linear import Linear, swap_linear
from .op import matmul, matmul_out
from .record import record_shapes

__all__ = ["Linear", "matmul", "mm", "matmul_out", "record_shapes", "swap_linear"]
