"""How many points of a space pass the static filter, remembered between runs.

Counting enumerates and filters the whole space (10 million points for warptile's default
space: 1-2 s), so `autotune list` takes counts from this cache and computes them only when asked
(`--count`); a dry run, which enumerates anyway, stores what it counted. A count is
keyed by the family's template text (its fingerprint), the space's value lists, the device
limits and the code of the filter itself, so any of them changing makes it unknown again.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from . import expr, limits, space
from .limits import DeviceLimits
from .space import Space


def cache_dir() -> Path:
    """Beside the NVRTC cache (`$AUTOTUNE_CACHE`, else the XDG cache folder)."""
    root = (
        os.environ.get("AUTOTUNE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autotune"
    )
    return Path(root) / "counts"


@lru_cache(maxsize=1)
def _filter_code() -> str:
    h = hashlib.sha1()
    for module in (space, expr, limits):
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()


def count_key(sp: Space, lim: DeviceLimits) -> str:
    blob = json.dumps(
        {"template": sp.family.fingerprint, "values": sp.values, "limits": lim.to_dict(), "filter": _filter_code()},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def cached_valid(sp: Space, lim: DeviceLimits) -> int | None:
    """The stored count of statically valid points, or None when it was never counted."""
    try:
        data = json.loads((cache_dir() / f"{count_key(sp, lim)}.json").read_text())
        valid = data["valid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return valid if isinstance(valid, int) and not isinstance(valid, bool) and 0 <= valid <= sp.size else None


def store_valid(sp: Space, lim: DeviceLimits, valid: int) -> None:
    path = cache_dir() / f"{count_key(sp, lim)}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"family": sp.family.name, "valid": valid, "total": sp.size}))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a cache that cannot be written only costs time


def count_valid(sp: Space, lim: DeviceLimits) -> int:
    """Enumerate the space (slow for large ones) and remember the count."""
    valid = len(sp.enumerate(lim).valid)
    store_valid(sp, lim, valid)
    return valid
