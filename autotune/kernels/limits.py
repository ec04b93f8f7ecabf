"""Device limits as data: from the live GPU (gpu.device) or from a built-in profile."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..core import yamlio
from ..core.types import UserError

# The profiles are data of the whole package (autotune/profiles/), not of this layer.
PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"


@dataclass(frozen=True)
class DeviceLimits:
    """What a GPU holds: per block, per SM and in all; the defaults are the H100's."""

    # A live device reports every field; a record stored before a field was kept was measured on
    # an H100 or H200, so the H100's values stand in for what it lacks.

    name: str
    arch: str  # e.g. "sm_90": what NVRTC compiles for
    sm_count: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    smem_per_block: int = 48 * 1024  # static (and default dynamic) limit
    smem_per_block_optin: int = 227 * 1024  # dynamic, after cudaFuncSetAttribute
    smem_per_sm: int = 228 * 1024
    regs_per_block: int = 65536
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    l2_bytes: int = 50 * 1024 * 1024
    threads_per_sm: int = 2048  # resident threads an SM holds at most (sm_80, sm_90; 1536 on sm_86 and sm_89)
    blocks_per_sm: int = 32  # resident blocks an SM holds at most (sm_80, sm_90; 16 on sm_86, 24 on sm_89)

    @property
    def slug(self) -> str:
        return gpu_slug(self.name)

    def to_dict(self) -> dict:
        return asdict(self)


def gpu_slug(name: str) -> str:
    """Return a GPU's results/ folder name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise UserError(f"GPU name {name!r} gives an empty folder name")
    return slug


def resident_per_sm(limits: Mapping[str, Any]) -> tuple[int, int]:
    """Return (threads, blocks) one SM holds at once, from limits as a record stores them."""
    # A record stored before they were kept has DeviceLimits' defaults: it was measured on an H100
    # or H200.
    return (
        limits.get("threads_per_sm", DeviceLimits.threads_per_sm),
        limits.get("blocks_per_sm", DeviceLimits.blocks_per_sm),
    )


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name: str = "h100") -> DeviceLimits:
    """Load a built-in profile (e.g. 'h100') for work without a GPU.

    Raises:
        UserError: No such profile, or a field missing, unknown or not of its type (a positive
            integer but name and arch), in one line naming the file and line.
    """
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"no device profile {name!r}; built in: {', '.join(available_profiles())}")
    data = yamlio.read(path)  # the one YAML reader (aliases bounded), though a profile ships with the package
    return DeviceLimits(**_checked(data, str(path)))


def _checked(data: Any, where: str) -> dict[str, Any]:
    """Return a profile's fields: all of DeviceLimits', names as text, the rest positive ints."""
    names = tuple(f.name for f in fields(DeviceLimits))
    yamlio.check_keys(data, names, where, "a device profile")
    missing = [n for n in names if n not in data]
    if missing:
        raise UserError(f"{where}: the profile has no {missing[0]!r} (a profile gives every one of {', '.join(names)})")
    for key, value in data.items():
        text = key in ("name", "arch")
        if text and not (isinstance(value, str) and value):
            raise UserError(f"{yamlio.where(where, data, key)}: {key} is {yamlio.shown(value)}, not a text")
        if not text and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UserError(f"{yamlio.where(where, data, key)}: {key} is {yamlio.shown(value)}, not a positive integer")
    return dict(data)


def profile_for_arch(arch: str | None) -> DeviceLimits:
    """Return the built-in profile matching an arch such as 'sm_90' (H100 when none is given)."""
    if arch is None:
        return load_profile("h100")
    for name in available_profiles():
        prof = load_profile(name)
        if prof.arch == arch:
            return prof
    base = load_profile("h100")
    # An unknown arch keeps H100's limits (a conservative superset of recent parts) but compiles for it.
    return DeviceLimits(**{**base.to_dict(), "arch": arch, "name": f"{base.name} limits, {arch}"})
