"""Regression check of stored results: still correct, still as fast, still the same build."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.types import Problem, Status, UserError
from ..kernels.family import Family
from ..kernels.limits import DeviceLimits
from ..search.evaluate import Evaluator, prepare
from .results import entry_config, iter_records


@dataclass
class CheckRow:
    """One stored config's verdict: pass, warn, stale or fail, with the figures and why."""

    shape: str
    family: str
    config: str
    status: str  # "pass", "warn", "stale" (static: its time is of another build) or "fail"
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


def check_static(
    root: Path | str, gpu_slug: str, jobs: int | None = None, progress: Callable[[int, int], None] | None = None
) -> list[CheckRow]:
    """Check without a GPU that each stored config renders, passes the filter, compiles as measured.

    A record names the kernel it measured by the digest of its machine code (`code`): the same code
    passes, whatever changed in the template's text; other code with the recorded registers and
    shared memory is stale (its time is of another build: re-time it on the GPU), and with other
    resources fails; either is a warning where the NVRTC version differs from the record's. An older
    record without `code` is judged by its registers, shared memory and `source` hash
    (_judge_without_code). `progress(done, total)` is called after each.

    Example:
        rows = check_static("results", "nvidia-h100-80gb-hbm3")
        failed = [r for r in rows if r.status == "fail"]
    """
    rows, families, todo = [], {}, []
    for _path, record in iter_records(root, gpu_slug):
        problem = Problem(**record["problem"])
        for fam_name, entry in record["families"].items():
            cfg = entry_config(entry)
            base = CheckRow(problem.name, fam_name, cfg.name, "fail", "")
            try:
                if fam_name not in families:
                    families[fam_name] = Family.load(fam_name)
                todo.append((base, problem, entry, cfg, families[fam_name].resolve(cfg), _limits(entry)))
            except UserError as exc:
                rows.append(_with(base, "fail", str(exc)))
    _compile_ahead([(resolved, limits.arch) for *_, resolved, limits in todo], jobs)
    total = len(rows) + len(todo)
    for base, problem, entry, cfg, resolved, limits in todo:
        (prep,) = prepare([cfg], problem, limits, limits.arch, families, jobs)
        if prep.measurement is not None:
            m = prep.measurement
            rows.append(_with(base, "fail", f"{m.status.value}: {m.message}"))
        else:
            rows.append(_judge(base, entry, resolved, prep.spec, limits.arch))
        if progress is not None:
            progress(len(rows), total)
    return rows


def _compile_ahead(configs: list, jobs: int | None) -> None:
    """Build every config at once, on every core, into the compile cache, where the check finds it.

    One at a time, NVRTC keeps one core busy. A build that fails here fails again, and is reported,
    in the check itself.
    """
    from ..gpu.compile import compile_many
    from ..kernels.render import DEFAULT_KERNEL, render

    compile_many([(render(r), DEFAULT_KERNEL, r.family.compile_arch(arch)) for r, arch in configs], "sm_90", jobs)


# Fresh builds tried before a record is called stale or failed. NVRTC does not always emit the
# same code for one source: for the largest warptile and colstream kernels its front end emits
# another PTX program from one build to the next (it depends on where memory lies: with address
# randomisation off, a new process's first build is the same every time), and ptxas then differs
# too, now and then by a few registers. A record names one of those builds; a build that differs
# is built again before it is reported.
_FRESH_TRIES = 5


def _judge(base: CheckRow, entry: dict, resolved, spec: dict, arch: str) -> CheckRow:
    from ..gpu.compile import compile_source, nvrtc_version
    from ..gpu.machine_code import code_digest
    from ..kernels.render import DEFAULT_KERNEL, render

    builds = [(code_digest(spec["cubin"]), spec["resources"])]
    for attempt in range(_FRESH_TRIES):
        code, got = builds[-1]
        # Built again while the code or (for a record without code) the resources differ from the
        # record's; other resources with the record's code are confirmed by one fresh build.
        if entry.get("code") in (None, code) and not _resource_diffs(entry, got):
            break
        if entry.get("code") == code and attempt > 0:
            break
        # Confirm with fresh compiles: neither a compile-cache entry nor one build of several
        # possible (above) may be what reports a regression (once, a cached entry said 247
        # registers where every fresh build said 243).
        fresh = compile_source(render(resolved), resolved.family.compile_arch(arch), DEFAULT_KERNEL, use_cache=False)
        r = fresh.resources
        smem = r.smem_static_bytes + spec["launch"].dynamic_smem
        builds.append((code_digest(fresh.cubin), dict(got, registers=r.registers, smem_bytes=smem)))
    # The verdict is of the build nearest the record (its code, then its resources), not of the
    # last one: a stale record's builds all differ in code, and one of them differing in
    # registers too is NVRTC's variation, not a kernel the record did not measure.
    code, got = min(builds, key=lambda b: (b[0] != entry.get("code"), bool(_resource_diffs(entry, b[1]))))
    diffs = _resource_diffs(entry, got)
    here, recorded = nvrtc_version(), (entry.get("versions") or {}).get("nvrtc")
    measured = f"{got['registers']} registers, {got['smem_bytes']} B smem"
    if entry.get("code") is None:
        return _judge_without_code(base, entry, resolved, diffs, measured, here, recorded)
    if entry["code"] == code and not diffs:
        return _with(base, "pass", f"the machine code measured; {measured}")
    if entry["code"] == code:  # the same instructions, another ptxas report: the compiler's
        return _with(base, "warn", f"{'; '.join(diffs)} (the machine code measured)")
    what = "; ".join(["the machine code differs from the one measured", *diffs])
    if recorded and recorded != here:
        return _with(base, "warn", f"{what} (NVRTC {here} here, {recorded} recorded)")
    if diffs:
        return _with(base, "fail", f"{what}: the record measured another kernel, tune this shape again")
    # The same registers and shared memory, other instructions: the config still builds and
    # launches as recorded, but its time is of an earlier build. Listed, so the exact records a
    # template change touched are known; `autotune check` on the GPU re-times them.
    return _with(base, "stale", f"{what}, same registers and shared memory: re-time it on the GPU")


def _judge_without_code(base, entry, resolved, diffs, measured, here, recorded) -> CheckRow:
    """Judge a record from before `code`: registers and shared memory must match.

    A difference fails where the source changed since the record (its `source` hash) or where the
    record names no source and the same NVRTC version; it warns where the source is the one measured
    (only the compiler can differ) or, without a hash, the NVRTC version differs.
    """
    from ..kernels.render import source_digest

    source = entry.get("source")
    if not diffs:
        return _with(base, "pass", measured)
    if source is not None and source == source_digest(resolved):
        return _with(base, "warn", f"{'; '.join(diffs)} (the source measured; NVRTC {here} here, {recorded} recorded)")
    if source is not None:
        return _with(base, "fail", f"{'; '.join(diffs)} (the source changed since the record)")
    if recorded and recorded != here:
        return _with(base, "warn", f"{'; '.join(diffs)} (NVRTC {here} here, {recorded} recorded)")
    return _with(base, "fail", "; ".join(diffs))


def _resource_diffs(entry: dict, got: dict) -> list[str]:
    return [
        f"{k} {entry.get(k)} -> {got[k]}"
        for k in ("registers", "smem_bytes")
        if entry.get(k) is not None and entry.get(k) != got[k]
    ]


def check_gpu(
    root: Path | str,
    gpu_slug: str,
    evaluator: Evaluator,
    tolerance: float = 0.05,
    progress: Callable[[int, int], None] | None = None,
) -> list[CheckRow]:
    """Re-verify and re-time every stored config on this GPU.

    A config slower than recorded by more than `tolerance` (a fraction), or incorrect, fails.
    A slow re-time that ran throttled, or below the recorded SM clock, is timed once more and the
    faster kept. A row says where the re-time, or cuBLAS's, ran at another SM clock than recorded,
    or throttled (clock_notes). `progress(done, total)` is called after each record (a shape's configs).
    """
    if evaluator.limits.slug != gpu_slug:
        raise UserError(
            f"this GPU is {evaluator.limits.name} ({evaluator.limits.slug}); "
            f"the results are for {gpu_slug}: run check on that GPU, or 'check --static'"
        )
    rows = []
    records = list(iter_records(root, gpu_slug))
    for done, (_path, record) in enumerate(records, 1):
        problem = Problem(**record["problem"])
        entries = list(record["families"].items())
        ms = evaluator.evaluate([entry_config(e) for _, e in entries], problem, retime=True)
        # A power cap's dip passes within seconds: one slow reading under it is no regression.
        again = [
            i
            for i, ((_, e), m) in enumerate(zip(entries, ms, strict=True))
            if m.status is Status.OK and m.gflops / e["gflops"] - 1 < -tolerance and _below_clock(m.extra, e)
        ]
        if again:
            redo = evaluator.evaluate([entry_config(entries[i][1]) for i in again], problem, retime=True)
            for i, m in zip(again, redo, strict=True):
                if m.status is Status.OK and m.gflops > ms[i].gflops:
                    ms[i] = m
        cublas = evaluator.baseline(problem)
        for i, ((fam_name, entry), m) in enumerate(zip(entries, ms, strict=True)):
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
                row.detail += "".join(f"; {note}" for note in clock_notes(m.extra, entry, cublas))
            if i in again:
                row.detail += "; timed twice (the first ran throttled or below the recorded clock)"
            rows.append(row)
        if progress is not None:
            progress(done, len(records))
    return rows


# Clocks closer than this (a fraction) are the same clock: an H100's steps are 15 MHz, and one
# timing's median sample moves by a step or two from run to run.
CLOCK_SLACK = 0.02


def clock_notes(now: dict, entry: dict, cublas_now: dict) -> list[str]:
    """Return what a re-check says of the clocks: another clock than recorded, or throttling now.

    Args:
        now: The re-time's clock fields (gpu.nvml.FIELDS; none where NVML was not read).
        entry: The record's entry, its own clock and its cuBLAS's where recorded.
        cublas_now: cuBLAS's timing now, with its clock fields.
    """
    notes = []
    for whose, timing, recorded in (("", now, entry), ("cuBLAS ", cublas_now, entry.get("cublas") or {})):
        mhz, was = timing.get("sm_clock_mhz"), recorded.get("sm_clock_mhz")
        if mhz is not None and was is not None and abs(mhz - was) > CLOCK_SLACK * was:
            notes.append(f"{whose}re-timed at {mhz} MHz, recorded at {was} MHz")
        elif mhz is not None and was is None and not whose:
            notes.append(f"re-timed at {mhz} MHz (no clock recorded)")
        if timing.get("throttle"):
            notes.append(f"{whose}throttled now ({', '.join(timing['throttle'])})")
    return notes


def _below_clock(now: dict, entry: dict) -> bool:
    """Whether a timing ran throttled, or below the recorded SM clock (beyond CLOCK_SLACK)."""
    mhz, was = now.get("sm_clock_mhz"), entry.get("sm_clock_mhz")
    return bool(now.get("throttle")) or (mhz is not None and was is not None and mhz < (1 - CLOCK_SLACK) * was)


def _with(row: CheckRow, status: str, detail: str) -> CheckRow:
    row.status, row.detail = status, detail
    return row


def format_rows(rows: list[CheckRow]) -> str:
    """Return the rows as a table for the terminal."""
    head = f"{'shape':<16} {'family':<11} {'result':<6} {'record':>9} {'now':>9}  detail"
    lines = [head, "-" * len(head)]
    for r in rows:
        rec = f"{r.recorded_gflops:9.0f}" if r.recorded_gflops else f"{'-':>9}"
        now = f"{r.gflops:9.0f}" if r.gflops else f"{'-':>9}"
        lines.append(f"{r.shape:<16} {r.family:<11} {r.status.upper():<6} {rec} {now}  {r.detail}")
    return "\n".join(lines)
