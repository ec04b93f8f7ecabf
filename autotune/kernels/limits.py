"""Device limits as data: from the live GPU (gpu.device) or from a built-in profile."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..core import yamlio
from ..core.types import UserError

# The profiles are data of the whole package (autotune/profiles/), not of this layer.
PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"


@dataclass(frozen=True)
class DeviceLimits:
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

    @property
    def slug(self) -> str:
        return gpu_slug(self.name)

    def to_dict(self) -> dict:
        return asdict(self)


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the results/ folder name)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise UserError(f"GPU name {name!r} gives an empty folder name")
    return slug


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name: str = "h100") -> DeviceLimits:
    """A built-in profile (e.g. 'h100') for work without a GPU."""
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UserError(f"no device profile {name!r}; built in: {', '.join(available_profiles())}")
    data = yamlio.read(path)  # the one YAML reader (aliases bounded), though a profile ships with the package
    known = {f.name for f in fields(DeviceLimits)}
    return DeviceLimits(**{k: v for k, v in data.items() if k in known})


def profile_for_arch(arch: str | None) -> DeviceLimits:
    """The built-in profile matching an arch such as 'sm_90' (H100 when none is given)."""
    if arch is None:
        return load_profile("h100")
    for name in available_profiles():
        prof = load_profile(name)
        if prof.arch == arch:
            return prof
    base = load_profile("h100")
    # An unknown arch keeps H100's limits (a conservative superset of recent parts) but compiles for it.
    return DeviceLimits(**{**base.to_dict(), "arch": arch, "name": f"{base.name} limits, {arch}"})
