"""The best stored config as a C header: parameters as #defines, the kernel, a host launcher."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from . import __version__
from .render import environment, render
from .results import atomic_write_text, best_entry, entry_config
from .space import Family
from .types import Problem

EXPORT_KERNEL = "autotune_tuned_sgemm_kernel"


def header_for_entry(record: dict, entry: dict, file_name: str = "tuned_sgemm.h") -> str:
    """Header text for one results entry."""
    cfg = entry_config(entry)
    fam = Family.load(cfg.family)
    params = fam.validate_params(cfg.as_dict(), f"stored config {cfg.name}")
    env = fam.derive(params)
    grid = [g.to_c(env) for g in fam.grid_exprs]
    probe = fam.launch_geometry(cfg, 1, 1, 1)
    p = record["problem"]
    return environment(fam.path.parent).get_template("_export.h.j2").render(
        FILE_NAME=file_name, VERSION=__version__,
        DATE=_dt.date.today().isoformat(), SHAPE=Problem(**p).name, GPU=record["gpu"]["name"],
        CONFIG_NAME=cfg.name, GFLOPS=entry["gflops"], RATIO=entry["ratio"],
        REGISTERS=entry.get("registers"), SMEM_BYTES=entry.get("smem_bytes"),
        ARCH=record["gpu"].get("arch", "sm_90"), FAMILY=fam.name, M=p["M"], N=p["N"], K=p["K"],
        PARAMS=sorted(params.items()), THREADS=probe["block"], DYNAMIC_SMEM=probe["dynamic_smem"],
        SCALE_C_FIRST=probe["scale_c_first"], GRID=grid, KERNEL_NAME=EXPORT_KERNEL,
        KERNEL_SOURCE=render(fam, cfg, kernel_name=EXPORT_KERNEL).strip(),
    )


def export(root: Path | str, gpu_slug: str, problem: Problem, out: Path | str,
           family: str | None = None) -> tuple[Path, dict]:
    """Write the header for the best stored result; returns (path, entry)."""
    record, entry = best_entry(root, gpu_slug, problem, family)
    out = Path(out)
    atomic_write_text(out, header_for_entry(record, entry, out.name))
    return out, entry
