"""Search strategies: one module each, registered by name (`--sampler`'s choices).

Every module of this folder is imported here, so that a new strategy is one file: a subclass of
`Strategy` decorated with `@register` (see base.py, and tpe.py, random_search.py, grid.py).
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import DEFAULT, Strategy, get, names, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["DEFAULT", "Strategy", "get", "names", "register"]
