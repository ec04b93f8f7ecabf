"""autotune in PyTorch models: the `autotune::matmul` operator, a drop-in `Linear`, and a recorder
of the GEMMs a model calls. Needs torch (`import autotune` alone does not import it).

    from autotune.pytorch import Linear, swap_linear, matmul, record_shapes
"""

from .linear import Linear, swap_linear
from .op import matmul, matmul_out
from .record import record_shapes

__all__ = ["Linear", "matmul", "matmul_out", "record_shapes", "swap_linear"]
