"""autotune: writes, checks and tunes strict-FP32 CUDA SGEMM kernels.

Importing the package does not import CuPy; only autotune.gpu touches the GPU, lazily.
"""

from .limits import DeviceLimits, load_profile
from .space import Family, Space, known_families
from .types import Config, Measurement, Problem, Status, UserError

__version__ = "0.1.0"


def matmul(A, B, out=None, alpha: float = 1.0, beta: float = 0.0):
    """C = alpha * A @ B + beta * C with the tuned kernel for this GPU and shape (see autotune.api)."""
    from .api import matmul as _matmul

    return _matmul(A, B, out, alpha, beta)


def load(shape=None, **kwargs):
    """A compiled, verified kernel for a stored result (see autotune.api.load)."""
    from .api import load as _load

    return _load(shape, **kwargs)


__all__ = [
    "Config",
    "DeviceLimits",
    "Family",
    "Measurement",
    "Problem",
    "Space",
    "Status",
    "UserError",
    "known_families",
    "load",
    "load_profile",
    "matmul",
    "__version__",
]
