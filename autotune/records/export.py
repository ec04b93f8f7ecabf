"""The best stored config as a C header: parameters as #defines, the kernel, a host launcher.

The launcher is rendered from the config's launch plan (kernels/launch.py), the description the
Python runner executes: `autotune_sgemm_plan` computes the launch values and which steps run at
a shape (pure arithmetic, printable without a GPU), `autotune_sgemm` runs them.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

from ..core.tiers import tier
from ..core.types import Problem, UserError
from ..core.version import __version__
from ..kernels.family import Family, Resolved
from ..kernels.launch import BATCH_GRID_MAX, FLOATS, INTS, LONGS, POINTERS, TENSOR_MAPS
from ..kernels.render import render, render_template, template
from .results import best_entry, entry_config, record_path
from .store import atomic_write_text

DEFAULT_PREFIX = "autotune"
# A prefix: lowercase (macros take it upper-cased, so two that differ only by case would collide),
# single underscores (a double one is reserved to the compiler), not the kernel sources' own at_.
_PREFIX = re.compile(r"(?!at_)(?!at$)[a-z](?:_?[a-z0-9])*")
_PREFIX_MAX = 32
# The kernels' linkage: NVRTC's sources declare them extern "C" (the tuner looks them up by name);
# defined in a header that several .cu files of a program include, each would define the same
# symbol, so the header makes them static, one copy per file that launches them.
_EXTERN_KERNEL = re.compile(r'\bextern\s+"C"\s+(?=__global__)')
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)

# Kernel arguments (launch.py's names) as the launcher's C expressions.
_C_ARGS = {
    "M": "m",
    "N": "n",
    "N_k": "n_used",
    "K": "k",
    "alpha": "alpha",
    "beta": "beta",
    "A": "A_used",
    "A_IN": "A",
    "A_PACKED": "A_packed",
    "B": "B_used",
    "B_IN": "B",
    "B_PACKED": "B_packed",
    "C": "C_used",
    "C_IN": "C",
    "C_PACKED": "C_packed",
    "WS": "ws",
    "lda": "lda",
    "ldb": "ldb",
    "ldc": "ldc",
    "lda_k": "lda_used",
    "ldb_k": "ldb_used",
    "ldc_k": "ldc_used",
    "pitch_a": "(int)p.pitch_a",
    "pitch_b": "(int)p.pitch_b",
    "pitch_c": "(int)p.pitch_c",
    "tail_first": "(int)p.tail_first",
    "stride_a": "strideA",
    "stride_b": "strideB",
    "stride_c": "strideC",
    "TMAP_A": "tmap_a",
    "TMAP_B": "tmap_b",
}
assert set(_C_ARGS) == set(POINTERS + FLOATS + INTS + LONGS + TENSOR_MAPS)
# The plan struct's fields and the launch values they hold (0 where a plan has none); tail, a
# split tail's tiles, is read by the dispatching header's model.
_PLAN_FIELDS = {f: f for f in (
    "ws_bytes", "ws_zeroed", "pack_a", "pack_a_at", "pitch_a", "pack_b", "pack_b_at", "pitch_b",
    "pack_c", "pack_c_at", "pitch_c", "tail_first",
)} | {"tail": "TAIL"}  # fmt: skip


# What text may keep as it is in a header's comments and string literals: printable ASCII but the
# backslash (it splices lines, so a comment could swallow the next line or end elsewhere), '"'
# (ends a literal), '*' ('*/' ends a block comment, '/*' opens one), '?' ('??/' is a backslash
# to compilers that read trigraphs) and '%' (the escape below).
_C_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !#$&'()+,-./:;<=>@[]^_`{|}~")


def c_text(text: object, longest: int = 256) -> str:
    """Return `text` made inert inside a C/C++ comment (// or /* */) and a string literal.

    Each character not in _C_SAFE (newlines and other control characters, backslash, quote, '*',
    '?', '%', anything past ASCII) is written as %XX per UTF-8 byte, and the result is cut to at
    most `longest` characters (with '...').
    """
    # Everything from outside that a header shows -- a GPU's name, a file name, names and figures
    # from a record -- goes through this, however it was validated before.
    out = "".join(c if c in _C_SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "replace")) for c in str(text))
    return out if len(out) <= longest else out[: longest - 3] + "..."


def launcher_context(resolved: Resolved, kernel_name: str) -> dict:
    """Return what _export.h.j2 needs to write the launch plan and the launcher of `resolved`."""
    plan = resolved.plan
    values = plan.c_values(host_only=True)
    names = {n for n, _ in values}
    steps = []
    for step in plan.steps:
        when, grid = plan.c_step(step)
        steps.append(
            {
                "kernel": kernel_name + step.kernel,
                "when": when,
                "grid": grid,
                "block": step.block,
                "dynamic_smem": step.dynamic_smem,
                "args": [_C_ARGS[a] for a in step.args],
                "beta_only": step.beta_only,
            }
        )
    return dict(
        KERNEL_NAME=kernel_name,
        BATCHED=plan.batched,
        BATCH_GRID_MAX=BATCH_GRID_MAX,
        THREADS=plan.block,
        DYNAMIC_SMEM=plan.dynamic_smem,
        NEEDS_SLOTS=plan.needs_slots,
        HAS_WS=plan.has_workspace,
        PACKS_A=plan.packs_a,
        PACKS_B=plan.packs_b,
        PACKS_C=plan.packs_c,
        VALUES=values,
        STEPS=steps,
        FIELDS=[(f, v if v in names else "0") for f, v in _PLAN_FIELDS.items()],
        SMEM_KERNELS=[s["kernel"] for s in steps if s["dynamic_smem"]],
        TENSOR_MAPS=plan.tensor_maps,
        # (floats along a stored row, rows) of A and B as stored, in the launcher's m, n, k
        MAP_DIMS=tuple(", ".join(dims) for dims in plan.tensor_map_shapes("m", "n", "k")),
    )


def check_prefix(prefix: str) -> str:
    """Return `prefix` if it can name a header's symbols; else raise UserError saying what can."""
    if len(prefix) > _PREFIX_MAX or not _PREFIX.fullmatch(prefix):
        raise UserError(
            f"--prefix {c_text(prefix, 40)!r}: a C name of lowercase letters, digits and single underscores, "
            f"starting with a letter, at most {_PREFIX_MAX} characters, neither 'at' nor 'at_...' "
            "(the kernels' own names)"
        )
    return prefix


def header_for_entry(record: dict, entry: dict, file_name: str = "tuned_sgemm.h", prefix: str = DEFAULT_PREFIX) -> str:
    """Return the header text for one results entry."""
    return header_for_entries([(record, entry)], file_name, prefix)


def _arch_flags(arch: str) -> str:
    """Return nvcc's flags for `arch`."""
    # An architecture-specific target (sm_90a) needs the -gencode form: the -arch=sm_90a
    # shorthand also runs a plain sm_90 pass, which rejects wgmma.
    if arch.endswith("a"):
        num = arch.removeprefix("sm_")
        return f"-gencode=arch=compute_{num},code=sm_{num}"
    return f"-arch={arch}"


def header_for_entries(
    picks: list[tuple[dict, dict]], file_name: str = "tuned_sgemm.h", prefix: str = DEFAULT_PREFIX
) -> str:
    """Return the header text for results entries of one shape: one, or one per layout.

    With one entry, the header of that layout, its entry points global; with one per layout,
    each kernel and its launchers in namespace <prefix>_<layout>, and entry points in cuBLAS's
    convention dispatching on the transposes.

    Args:
        prefix: What every name the header defines starts with (its macros and include guard
            upper-cased). Another than the default also puts a one-layout header's kernel in its
            namespace and #undefs the kernel source's own macros, so that headers of different
            prefixes can be included in one program.
    """
    check_prefix(prefix)
    multi = len(picks) > 1
    named = multi or prefix != DEFAULT_PREFIX  # the sections in namespaces of their own
    sections, notes, undefs, first = [], [], [], None
    for record, entry in picks:
        resolved, layout, context, text, undef = _section(entry, record, prefix, multi)
        sections.append((f"{prefix}_{layout}" if named else "", text))
        undefs.append(undef)
        notes.append(c_text(f"{layout}: {resolved.name}, {entry['gflops']:.0f} GFLOP/s, {entry['ratio']:.2f}x cuBLAS"))
        first = first or (record, entry, resolved, context)
    record, entry, resolved, context = first
    p = record["problem"]
    shape = Problem(**p)
    # Text (a C comment's or a string literal's) through c_text; numbers as numbers.
    return render_template(
        template(resolved.family.path.parent, "_export.h.j2"),
        MULTI=multi,
        P=prefix,
        PU=prefix.upper(),
        SECTIONS=sections,
        UNDEFS=undefs,
        SECTION_NOTES=notes,
        LAYOUTS=[c_text(Problem(**r["problem"]).layout) for r, _ in picks],
        FILE_NAME=c_text(file_name),
        VERSION=c_text(__version__),
        DATE=c_text(_dt.date.today().isoformat()),
        SHAPE=c_text(shape.with_layout("nn").name if multi else shape.name),
        TRANS=resolved.plan.layout,
        GPU=c_text(record["gpu"]["name"]),
        CONFIG_NAME=c_text(resolved.name, 1024),
        GFLOPS=float(entry["gflops"]),
        RATIO=float(entry["ratio"]),
        REGISTERS=_count(entry.get("registers")),
        SMEM_BYTES=_count(entry.get("smem_bytes")),
        ARCH_FLAGS=c_text(_arch_flags(resolved.family.compile_arch(record["gpu"].get("arch") or "sm_90"))),
        TIER=c_text(tier(shape.precision).c_name),
        FAMILY=c_text(resolved.family.name),
        M=p["M"],
        N=p["N"],
        K=p["K"],
        PARAMS=sorted(resolved.config.params),
        **context,
    )


def _section(entry: dict, record: dict, prefix: str, multi: bool) -> tuple[Resolved, str, dict, str, list[str]]:
    """Return one entry's part of a header, and what the header needs to know of it.

    Returns:
        (its config, its layout, its launcher's context, the text of its kernel, plan and
        launchers, the kernel source's macros that a prefixed header undefines after it)
    """
    cfg = entry_config(entry)
    resolved = Family.load(cfg.family).resolve(cfg, f"stored config {cfg.name}")
    layout = Problem(**record["problem"]).layout
    kernel = f"{prefix}_tuned_sgemm_kernel" + (f"_{layout}" if multi else "")
    context = launcher_context(resolved, kernel)
    source = _EXTERN_KERNEL.sub("static ", render(resolved, kernel_name=kernel).strip())
    section = template(resolved.family.path.parent, "_export_section.h.j2")
    text = render_template(
        section, KERNEL_SOURCE=source, TRANS=resolved.plan.layout, P=prefix, PU=prefix.upper(), **context
    )
    # The source's macros that do not carry the kernel's name (and so the prefix).
    own = [] if prefix == DEFAULT_PREFIX else _DEFINE.findall(source)
    return resolved, layout, context, text.strip(), sorted({name for name in own if kernel not in name})


def _count(value: object) -> str:
    """Return a record's count (registers, bytes) as the header's comment says it, or "unknown"."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "unknown"


def export(
    root: Path | str,
    gpu_slug: str,
    problem: Problem,
    out: Path | str,
    family: str | None = None,
    layouts: list[str] | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> tuple[Path, dict]:
    """Write the C header of the best stored result for `problem` to `out`.

    Args:
        family: Only this family's entries, if given.
        layouts: One kernel per layout, each stored for the problem's shape in that layout
            (default: the problem's own layout).
        prefix: What the header's names start with (header_for_entries).

    Returns:
        (the header's path, the first layout's entry); the header is written whole or not at all.

    Raises:
        UserError: No such record, or one that is damaged or whose config its family refuses, or
            a prefix that cannot name C symbols.
    """
    check_prefix(prefix)
    picks = []
    for lay in layouts or [problem.layout]:
        record, entry = best_entry(root, gpu_slug, problem.with_layout(lay), family)  # read and checked
        cfg = entry_config(entry)
        try:  # the config as its family takes it, or the record named
            Family.load(cfg.family).resolve(cfg, f"stored config {cfg.name}")
        except UserError as exc:
            raise UserError(f"{record_path(root, gpu_slug, problem.with_layout(lay))}: {exc}") from None
        picks.append((record, entry))
    out = Path(out)
    text = header_for_entries(picks, out.name, prefix)  # all of it before anything is written
    atomic_write_text(out, text)
    return out, picks[0][1]
