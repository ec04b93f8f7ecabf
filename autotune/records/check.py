"""Regression check of stored results: still correct, still as fast, still the same build."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.types import Problem, Status, UserError
from ..kernels.limits import DeviceLimits
from ..kernels.space import Family
from ..search.evaluate import Evaluator, prepare
from .results import entry_config, iter_records


@dataclass
class CheckRow:
    shape: str
    family: str
    config: str
    status: str  # "pass", "warn" or "fail"
    detail: str
    recorded_gflops: float | None = None
    gflops: float | None = None


def _limits(entry: dict) -> DeviceLimits:
    try:
        lim = dict(entry["limits"])
        lim.pop("versions", None)
        return DeviceLimits(**lim)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"stored limits are not device limits ({type(exc).__name__}: {exc})") from None


def check_static(root: Path | str, gpu_slug: str, jobs: int | None = None) -> list[CheckRow]:
    """No GPU: each stored config renders, passes the filter, and compiles with the recorded
    registers and shared memory. A difference is a failure where the source changed since the
    record (its `source` hash), or where the record names no source and the same NVRTC version;
    a warning where the source is the one measured (only the compiler can differ: builds of one
    NVRTC version allocate registers differently) or, without a hash, the NVRTC version differs."""
    from ..gpu.compile import compile_source, nvrtc_version
    from ..kernels.render import DEFAULT_KERNEL, render, source_digest

    rows, families = [], {}
    here = nvrtc_version()
    for _path, record in iter_records(root, gpu_slug):
        problem = Problem(**record["problem"])
        for fam_name, entry in record["families"].items():
            cfg = entry_config(entry)
            base = CheckRow(problem.name, fam_name, cfg.name, "fail", "")
            try:
                if fam_name not in families:
                    families[fam_name] = Family.load(fam_name)
                resolved = families[fam_name].resolve(cfg)
                limits = _limits(entry)
            except UserError as exc:
                rows.append(_with(base, "fail", str(exc)))
                continue
            (prep,) = prepare([cfg], problem, limits, limits.arch, families, jobs)
            if prep.measurement is not None:
                m = prep.measurement
                rows.append(_with(base, "fail", f"{m.status.value}: {m.message}"))
                continue
            got = prep.spec["resources"]
            diffs = _resource_diffs(entry, got)
            if diffs:
                # Confirm with a fresh compile: a compile-cache entry must not be what reports a
                # regression (seen once in a test session: 247 registers cached, 243 on every
                # fresh compile, never reproduced).
                arch = resolved.family.compile_arch(limits.arch)
                fresh = compile_source(render(resolved), arch, DEFAULT_KERNEL, use_cache=False).resources
                got = dict(
                    got,
                    registers=fresh.registers,
                    smem_bytes=fresh.smem_static_bytes + prep.spec["launch"].dynamic_smem,
                )
                diffs = _resource_diffs(entry, got)
            recorded = (entry.get("versions") or {}).get("nvrtc")
            source = entry.get("source")
            same_source = bool(diffs) and source is not None and source == source_digest(resolved)
            if not diffs:
                rows.append(_with(base, "pass", f"{got['registers']} registers, {got['smem_bytes']} B smem"))
            elif same_source:
                why = f"the source measured; NVRTC {here} here, {recorded} recorded"
                rows.append(_with(base, "warn", f"{'; '.join(diffs)} ({why})"))
            elif source is not None:
                rows.append(_with(base, "fail", f"{'; '.join(diffs)} (the source changed since the record)"))
            elif recorded and recorded != here:
                rows.append(_with(base, "warn", f"{'; '.join(diffs)} (NVRTC {here} here, {recorded} recorded)"))
            else:
                rows.append(_with(base, "fail", "; ".join(diffs)))
    return rows


def _resource_diffs(entry: dict, got: dict) -> list[str]:
    return [
        f"{k} {entry.get(k)} -> {got[k]}"
        for k in ("registers", "smem_bytes")
        if entry.get(k) is not None and entry.get(k) != got[k]
    ]


def check_gpu(root: Path | str, gpu_slug: str, evaluator: Evaluator, tolerance: float = 0.05) -> list[CheckRow]:
    """Re-verify and re-time every stored config on this GPU; slower than recorded by more
    than `tolerance` (a fraction), or incorrect, fails."""
    if evaluator.limits.slug != gpu_slug:
        raise UserError(
            f"this GPU is {evaluator.limits.name} ({evaluator.limits.slug}); "
            f"the results are for {gpu_slug}: run check on that GPU, or 'check --static'"
        )
    rows = []
    for _path, record in iter_records(root, gpu_slug):
        problem = Problem(**record["problem"])
        entries = list(record["families"].items())
        ms = evaluator.evaluate([entry_config(e) for _, e in entries], problem, retime=True)
        cublas = evaluator.baseline(problem)
        for (fam_name, entry), m in zip(entries, ms, strict=True):
            row = CheckRow(problem.name, fam_name, m.config.name, "fail", "", entry["gflops"], m.gflops)
            if m.status is not Status.OK:
                row.detail = f"{m.status.value}: {m.message}"
            else:
                change = m.gflops / entry["gflops"] - 1
                slow = change < -tolerance
                row.status = "fail" if slow else "pass"
                row.detail = (
                    f"{change:+.1%} vs record, error {m.error:.1e}, "
                    f"{m.gflops / cublas['gflops']:.2f}x cuBLAS now "
                    f"({entry['ratio']:.2f}x recorded)"
                )
            rows.append(row)
    return rows


def _with(row: CheckRow, status: str, detail: str) -> CheckRow:
    row.status, row.detail = status, detail
    return row


def format_rows(rows: list[CheckRow]) -> str:
    head = f"{'shape':<16} {'family':<11} {'result':<6} {'record':>9} {'now':>9}  detail"
    lines = [head, "-" * len(head)]
    for r in rows:
        rec = f"{r.recorded_gflops:9.0f}" if r.recorded_gflops else f"{'-':>9}"
        now = f"{r.gflops:9.0f}" if r.gflops else f"{'-':>9}"
        lines.append(f"{r.shape:<16} {r.family:<11} {r.status.upper():<6} {rec} {now}  {r.detail}")
    return "\n".join(lines)
