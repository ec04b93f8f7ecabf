"""How many points of a space pass the static filter, remembered between runs.

Counting enumerates and filters the whole space (10 million points for warptile's default space:
1-2 s), so `autotune list` takes counts from this cache and computes them only when asked
(`--count`); a dry run, which enumerates anyway, stores what it counted.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from ..core.cachedir import cache_folder, read_bytes, write_atomic
from . import constraints, enumeration, expr, family, limits, space
from .limits import DeviceLimits
from .space import Space


def cache_dir() -> Path | None:
    """Return the counts folder beside the NVRTC cache (cachedir.py), or None when there is none."""
    return cache_folder("counts")


@lru_cache(maxsize=1)
def _filter_code() -> str:
    h = hashlib.sha1()
    for module in (space, family, constraints, enumeration, expr, limits):
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()


# A count is keyed by the family's template text (its fingerprint), the space's value lists and a
# problem's rules (Space.for_problem), the device limits and the code of the filter itself: a
# change of any makes it unknown again.
def count_key(sp: Space, lim: DeviceLimits) -> str:
    """Return the cache key of a space's count under a device's limits."""
    blob = json.dumps(
        {
            "template": sp.family.fingerprint,
            "values": sp.values,
            "rules": [r.label for r in sp.rules],
            "limits": lim.to_dict(),
            "filter": _filter_code(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _entry(sp: Space, lim: DeviceLimits) -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / f"{count_key(sp, lim)}.json"


def cached_valid(sp: Space, lim: DeviceLimits) -> int | None:
    """Return the stored count of statically valid points, or None when it was never counted."""
    raw = read_bytes(_entry(sp, lim))
    try:
        valid = json.loads(raw)["valid"] if raw is not None else None
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return valid if isinstance(valid, int) and not isinstance(valid, bool) and 0 <= valid <= sp.size else None


def store_valid(sp: Space, lim: DeviceLimits, valid: int) -> None:
    """Remember a count (a cache that cannot be written only costs time)."""
    write_atomic(_entry(sp, lim), json.dumps({"family": sp.family.name, "valid": valid, "total": sp.size}).encode())


def count_valid(sp: Space, lim: DeviceLimits) -> int:
    """Enumerate the space (slow for large ones) and remember the count."""
    valid = len(sp.enumerate(lim).valid)
    store_valid(sp, lim, valid)
    return valid
