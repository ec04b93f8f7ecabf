"""autotune: writes, checks and tunes strict-FP32 CUDA SGEMM kernels.

Importing the package does not import CuPy: gpu/ and dispatch/ import it, lazily (ARCHITECTURE.md).
"""

# matmul and load themselves, not wrappers: a call costs no import statement (api.py imports
# CuPy only when a GPU is used).
from .core.types import Config, Measurement, NoGPUError, Problem, Status, UserError
from .core.version import __version__
from .dispatch import api as _api
from .dispatch.api import load, matmul
from .kernels.family import Family, known_families
from .kernels.limits import DeviceLimits, load_profile
from .kernels.space import Space


def _traced_matmul(*args):
    """autotune.matmul under torch.compile: the pytorch layer's custom operators."""
    # Imported at the first traced call (torch.compile runs the import): a program that never
    # compiles never imports torch through autotune.
    from .pytorch.traced import traced_matmul

    return traced_matmul(*args)


_api.traced = _traced_matmul

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
