"""autotune: writes, checks and tunes strict-FP32 CUDA SGEMM kernels.

Importing the package does not import CuPy: gpu/ and dispatch/ import it, lazily (ARCHITECTURE.md).
"""

# matmul and load themselves, not wrappers: a call costs no import statement (api.py imports
# CuPy only when a GPU is used).
from .core.types import Config, Measurement, NoGPUError, Problem, Status, UserError
from .core.version import __version__
from .dispatch.api import load, matmul
from .kernels.family import Family, known_families
from .kernels.limits import DeviceLimits, load_profile
from .kernels.space import Space

__all__ = [
    "Config",
    "DeviceLimits",
    "Family",
    "Measurement",
    "NoGPUError",
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
