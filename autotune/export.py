"""The best stored config as a C header: parameters as #defines, the kernel, a host launcher."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from . import __version__
from .render import environment, render
from .results import atomic_write_text, best_entry, entry_config
from .space import Family, fold_values
from .types import Problem

EXPORT_KERNEL = "autotune_tuned_sgemm_kernel"


def header_for_entry(record: dict, entry: dict, file_name: str = "tuned_sgemm.h") -> str:
    """Header text for one results entry."""
    cfg = entry_config(entry)
    fam = Family.load(cfg.family)
    params = fam.validate_params(cfg.as_dict(), f"stored config {cfg.name}")
    env = fam.derive(params)
    # Launch values the config fixes fold into what reads them; the rest are C constants.
    env, values = fold_values(((k, v.text) for k, v in fam.value_exprs.items()), env)
    grid = [g.to_c(env) for g in fam.grid_exprs]
    plan = fam.launch_plan(cfg)

    def c_or_none(expr):  # C over M, N, K and SLOTS; None where undeclared or folded to 0
        text = expr.to_c(env) if expr is not None else "0"
        return None if text == "0" else text

    p = record["problem"]
    return environment(fam.path.parent).get_template("_export.h.j2").render(
        FILE_NAME=file_name, VERSION=__version__,
        DATE=_dt.date.today().isoformat(), SHAPE=Problem(**p).name, GPU=record["gpu"]["name"],
        CONFIG_NAME=cfg.name, GFLOPS=entry["gflops"], RATIO=entry["ratio"],
        REGISTERS=entry.get("registers"), SMEM_BYTES=entry.get("smem_bytes"),
        ARCH=record["gpu"].get("arch", "sm_90"), FAMILY=fam.name, M=p["M"], N=p["N"], K=p["K"],
        PARAMS=sorted(params.items()), THREADS=plan.block, DYNAMIC_SMEM=plan.dynamic_smem,
        SCALE_C_FIRST=c_or_none(fam.scale_expr), GRID=grid, KERNEL_NAME=EXPORT_KERNEL,
        NEEDS_SLOTS=plan.needs_slots, WORKSPACE_ARG=fam.workspace_expr is not None,
        WORKSPACE=c_or_none(fam.workspace_expr), WORKSPACE_ZEROED=fam.workspace_zeroed_expr.to_c(env),
        PACK_B_ARG=fam.pack_b_expr is not None, PACK_B=c_or_none(fam.pack_b_expr),
        PACK_B_AT=fam.pack_b_at_expr.to_c(env),
        VALUES=values,
        TAIL_TILES=c_or_none(fam.tail_tiles_expr), TAIL_FIRST=fam.tail_first_expr.to_c(env),
        TAIL_GRID=fam.tail_grid_expr.to_c(env),
        KERNEL_SOURCE=render(fam, cfg, kernel_name=EXPORT_KERNEL).strip(),
    )


def export(root: Path | str, gpu_slug: str, problem: Problem, out: Path | str,
           family: str | None = None) -> tuple[Path, dict]:
    """Write the header for the best stored result; returns (path, entry)."""
    record, entry = best_entry(root, gpu_slug, problem, family)
    out = Path(out)
    atomic_write_text(out, header_for_entry(record, entry, out.name))
    return out, entry
