"""autotune: writes, checks and tunes strict-FP32 CUDA SGEMM kernels.

Importing the package does not import CuPy; only autotune.gpu touches the GPU, lazily.
"""

# matmul and load themselves, not wrappers: a call costs no import statement (api.py imports
# CuPy only when a GPU is used).
from .api import load, matmul
from .limits import DeviceLimits, load_profile
from .space import Family, Space, known_families
from .types import Config, Measurement, NoGPUError, Problem, Status, UserError

__version__ = "0.1.0"


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
