"""autotune report: PNG plots and a Markdown page from results/<gpu>/ and its Optuna studies."""

from __future__ import annotations

import collections
import math
import os
from pathlib import Path

from ..core.files import default_database, default_database_url
from ..core.tiers import TIERS
from ..core.types import Problem, UserError
from . import plots
from .results import iter_records
from .store import atomic_write_text
from .validate import fastest


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise UserError("autotune report needs matplotlib: pip install -e '.[report]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _studies(root: Path, slug: str) -> dict[tuple[str, str], list]:
    """Return (shape, family) -> trials of every study stored for this GPU."""
    import optuna

    from ..search.sqlite import check_files

    db = default_database(root, slug)
    if not os.path.lexists(db):
        return {}
    check_files(db)  # a link planted there would have Optuna's tables written wherever it points
    url = default_database_url(root, slug)
    out: dict[tuple[str, str], list] = collections.defaultdict(list)
    for s in optuna.get_all_study_summaries(url, include_best_trial=False):
        parts = s.study_name.split("/")
        if len(parts) != 4 or parts[0] != slug:
            continue
        study = optuna.load_study(study_name=s.study_name, storage=url)
        out[(parts[1], parts[2])].append(study)
    return out


def write_report(root: Path | str, slug: str, out_dir: Path | str | None = None, importance_top: int = 3) -> Path:
    """Write the plots and report.md; return the Markdown path.

    One section a precision tier, each against its own baseline (the cuBLAS its records were timed
    against), with the SM clock and power where the records keep them; then the studies' plots.
    """
    plt = _plt()
    root = Path(root)
    records = sorted(
        (rec for _p, rec in iter_records(root, slug) if rec["families"]), key=lambda r: Problem(**r["problem"]).flops
    )
    if not records:
        raise UserError(f"no results for {slug} under {root}")
    studies = _studies(root, slug)  # a database refused before any folder is made
    out = Path(out_dir) if out_dir else root / slug / "report"
    if out.is_symlink():  # written through, it would put the plots wherever the link points
        raise UserError(f"-o {out}: is a symbolic link; name a folder of its own")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"-o {out}: cannot create the folder ({exc.strerror or exc})") from None
    shapes = [Problem(**r["problem"]).name for r in records]
    best = [_best(r) for r in records]
    gpu_name = records[0]["gpu"]["name"]
    md = [
        f"# autotune report: {gpu_name}",
        "",
        "Each precision tier against its own baseline: the cuBLAS its records were timed against, in "
        "the same process, on the same operands. The SM clock and board power are those NVML read "
        "while each was timed (the median of the samples), where the record keeps them.",
        "",
    ]
    for name, recs in _by_tier(records):
        md += _tier_section(plt, out, gpu_name, name, recs)
    md += _trials_section(plt, out, shapes, records, studies)
    md += _progress_section(plt, out, shapes, records, studies)
    md += _importance_section(plt, out, shapes, best, studies, importance_top)
    if studies:
        md += [
            "## Explore the studies",
            "",
            "With the `dashboard` extra (`pip install -e '.[dashboard]'`), "
            f"`optuna-dashboard sqlite:///{default_database(root, slug).as_posix()}` opens every study of this GPU.",
            "",
        ]
    path = out / "report.md"
    atomic_write_text(path, "\n".join(md))
    return path


def _best(record: dict) -> dict:
    """Return the fastest family's entry of a shape's record."""
    return record["families"][fastest(record["families"])]


def _by_tier(records: list[dict]) -> list[tuple[str, list[dict]]]:
    """Return (tier, its records) for each tier with records, strictest first."""
    groups = collections.defaultdict(list)
    for rec in records:
        groups[Problem(**rec["problem"]).precision].append(rec)
    return [(name, groups[name]) for name in TIERS if name in groups]


# What a record's cuBLAS path measured: the baseline a tier's ratios are against.
_BASELINES = {"matmul": "cuBLAS FP32 (SGEMM)", "gemm": "cuBLAS FP32 (SGEMM)", "gemm_tf32": "cuBLAS TF32"}


def baseline(entry: dict, tier_name: str) -> str:
    """Return the baseline an entry was timed against: its cuBLAS path's, else its tier's bar."""
    path = entry["cublas"].get("path")
    if path in _BASELINES:
        return _BASELINES[path]
    return _BASELINES["gemm_tf32" if TIERS[tier_name].bar == "TF32" else "gemm"]


def _tier_section(plt, out: Path, gpu_name: str, name: str, records: list[dict]) -> list[str]:
    """Plot and tabulate one tier's best config per shape against the tier's baseline."""
    t = TIERS[name]
    best = [_best(r) for r in records]
    bases = sorted({baseline(b, name) for b in best})
    against = " and ".join(bases)
    what = t.help if t.strict else t.c_name.split(" (")[0]
    labels = [_label(Problem(**r["problem"])) for r in records]
    ratios = [b["ratio"] for b in best]
    low = min(range(len(ratios)), key=ratios.__getitem__)
    md = [
        f"## {name}: {what}, against {against}",
        "",
        f"{len(best)} shapes: geomean {_geomean(ratios):.2f}x {against}, lowest {ratios[low]:.2f}x at "
        f"{labels[low]}, {sum(r < 1 for r in ratios)} below 1.0x. A * marks a timing NVML saw throttled "
        "(power or heat held the clock down).",
        "",
    ]
    rows = [
        {"label": lab, "tflops": b["gflops"] / 1e3, "base_tflops": b["cublas"]["gflops"] / 1e3, "ratio": b["ratio"],
         "throttled": bool(b.get("throttle") or b["cublas"].get("throttle"))}
        for lab, b in zip(labels, best, strict=True)
    ]  # fmt: skip
    title = f"{name}: best kernel vs {against}\n{gpu_name}"
    for png in plots.shapes_figures(plt, out, f"shapes_{name}", title, rows):
        md += [f"![{name} shapes]({png})", ""]
    md += [
        "| shape | family | TFLOP/s | baseline TFLOP/s | ratio | SM MHz (kernel / baseline) | W (kernel / baseline) "
        "| error | config |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for lab, b in zip(labels, best, strict=True):
        c = b["cublas"]
        md.append(
            f"| {lab} | {b['config']['family']} | {b['gflops'] / 1e3:.1f} | {c['gflops'] / 1e3:.1f} | "
            f"{b['ratio']:.2f}x | {_pair(b, c, 'sm_clock_mhz', '{}')} | {_pair(b, c, 'power_w', '{:.0f}')} | "
            f"{b['error']:.1e} | `{b['config']['name']}` |"
        )
    return md + [""] + _families_section(plt, out, name, against, labels, records)


def _label(problem: Problem) -> str:
    """Return a shape's name without its tier (its section names it)."""
    tag = f"_{problem.precision}"
    return problem.name[: -len(tag)] if problem.name.endswith(tag) else problem.name


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _pair(entry: dict, cublas: dict, key: str, fmt: str) -> str:
    """Return 'kernel / baseline' of a clock field, '-' where not recorded, '*' where throttled."""

    def one(timing: dict) -> str:
        if timing.get(key) is None:
            return "-"
        return fmt.format(timing[key]) + ("*" if timing.get("throttle") else "")

    return f"{one(entry)} / {one(cublas)}"


def _families_section(plt, out: Path, name: str, against: str, labels: list[str], records: list[dict]) -> list[str]:
    """Plot each family's best against the tier's baseline, at shapes with more than one family."""
    rows = [
        {"label": lab, "ratios": {f: e["ratio"] for f, e in r["families"].items()}}
        for lab, r in zip(labels, records, strict=True)
        if len(r["families"]) > 1
    ]
    if not rows:
        return []
    title = f"{name}: each family's best config\nx {against}"
    md = [f"### {name}: best per family", ""]
    for png in plots.families_figures(plt, out, f"families_{name}", title, rows):
        md += [f"![{name} families]({png})", ""]
    return md


def _trials_section(plt, out: Path, shapes: list[str], records: list[dict], studies: dict) -> list[str]:
    """Plot GFLOP/s of every verified trial with the baseline's line, per shape with a study."""
    md = ["## GFLOP/s per trial", ""]
    by_shape = collections.defaultdict(dict)
    for (shape, fam), sts in studies.items():
        by_shape[shape][fam] = [t for st in sts for t in st.get_trials(deepcopy=False)]
    for shape, rec in zip(shapes, records, strict=True):
        if shape not in by_shape:
            continue
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for fam, trials in sorted(by_shape[shape].items()):
            done = [t for t in trials if t.user_attrs.get("evaluated") and t.state.name == "COMPLETE"]
            done.sort(key=lambda t: t.datetime_complete or t.datetime_start)
            ax.plot(range(1, len(done) + 1), [t.value / 1e3 for t in done], "o", ms=3, label=f"{fam} ({len(done)})")
        base = baseline(_best(rec), Problem(**rec["problem"]).precision)
        ax.axhline(_best(rec)["cublas"]["gflops"] / 1e3, color="black", ls="--", lw=1, label=base)
        ax.set_xlabel("measured config (in order)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{shape}: every verified trial")
        ax.legend(fontsize=7, ncol=2)
        plots.save(plt, fig, out / f"trials_{shape}.png")
        md += [f"![trials {shape}](trials_{shape}.png)", ""]
    return md


def _best_so_far(study) -> tuple[list[int], list[float], list[float]]:
    """Return (trial number from 1, seconds since the first trial, best GFLOP/s so far) per trial.

    One tuple at each verified trial of `study`, in the order they finished.
    """
    trials = [t for t in study.get_trials(deepcopy=False) if t.datetime_start is not None]
    if not trials:
        return [], [], []
    t0 = min(t.datetime_start for t in trials)
    trials.sort(key=lambda t: t.datetime_complete or t.datetime_start)
    n, secs, best, top = [], [], [], 0.0
    for i, t in enumerate(trials, 1):
        if t.state.name == "COMPLETE" and t.user_attrs.get("evaluated") and t.value is not None:
            top = max(top, t.value)
            n.append(i)
            secs.append(((t.datetime_complete or t.datetime_start) - t0).total_seconds())
            best.append(top)
    return n, secs, best


def _progress_section(plt, out: Path, shapes: list[str], records: list[dict], studies: dict) -> list[str]:
    """Plot best-so-far against trials and wall time, one line a study, per shape with studies.

    And a table of when each study came within 2% of its own best.
    """
    md = [
        "## Best so far, against trials and wall time",
        "",
        "Each study's best verified TFLOP/s after each trial (every trial counts, failed or rejected "
        "ones too), against its trials and against seconds since its first trial started (compiles "
        "and re-timing included). A study is one family's space at one shape with one sampler; a resumed "
        "search or another sampler seed adds its trials to it.",
        "",
        "| shape | study | trials | wall s | best TFLOP/s | x baseline | within 2% of its best at |",
        "|---|---|---|---|---|---|---|",
    ]
    by_shape = collections.defaultdict(list)
    for (shape, fam), sts in sorted(studies.items()):
        for st in sts:
            n, secs, best = _best_so_far(st)
            if n:
                by_shape[shape].append((f"{fam} {st.study_name.split('/')[-1]}", n, secs, best, len(st.trials)))
    figures = []
    for shape, rec in zip(shapes, records, strict=True):
        lines = by_shape.get(shape)
        if not lines:
            continue
        cublas = _best(rec)["cublas"]["gflops"]
        base = baseline(_best(rec), Problem(**rec["problem"]).precision)
        fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
        for label, n, secs, best, total in lines:
            by_trial.step(n, [b / 1e3 for b in best], where="post", label=label)
            by_time.step(secs, [b / 1e3 for b in best], where="post", label=label)
            near = next(i for i, b in enumerate(best) if b >= 0.98 * best[-1])
            md.append(
                f"| {shape} | {label} | {total} | {secs[-1]:.1f} | {best[-1] / 1e3:.1f} | "
                f"{best[-1] / cublas:.2f}x | trial {n[near]}, {secs[near]:.1f} s |"
            )
        for ax in (by_trial, by_time):
            ax.axhline(cublas / 1e3, color="black", ls="--", lw=1, label=base)
        by_trial.set_xlabel("trial")
        by_time.set_xlabel("seconds since the study's first trial")
        by_trial.set_ylabel("best TFLOP/s so far")
        by_trial.set_title(f"{shape}: best so far")
        by_time.legend(fontsize=7)
        plots.save(plt, fig, out / f"progress_{shape}.png")
        figures += [f"![progress {shape}](progress_{shape}.png)", ""]
    return md + [""] + figures if figures else []


def _importance_section(plt, out: Path, shapes: list[str], best: list[dict], studies: dict, top: int) -> list[str]:
    """Plot parameter importance of the largest studies, the winning family's first.

    Optuna's default evaluator, no sklearn; the list stops at the first study under 10 trials.
    """
    import optuna

    winner = {shape: b["config"]["family"] for shape, b in zip(shapes, best, strict=True)}
    ranked = sorted(
        (
            (len([t for t in st.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]), shape, fam, st)
            for (shape, fam), sts in studies.items()
            for st in sts
        ),
        key=lambda x: (winner.get(x[1]) != x[2], -x[0]),
    )
    shown = 0
    md = [
        "## Parameter importance",
        "",
        "`optuna.importance.get_param_importances` (its default evaluator) over the verified trials of "
        "a study: how much each parameter decides GFLOP/s. Parameters fixed in the space score 0.",
        "",
    ]
    for n, shape, fam, st in ranked:
        if shown >= top or n < 10:
            break
        try:
            imp = optuna.importance.get_param_importances(st)
        except (RuntimeError, ValueError):
            continue
        names = list(imp)[::-1]
        fig, ax = plt.subplots(figsize=(6, 0.3 * len(names) + 1.2))
        ax.barh(names, [imp[k] for k in names])
        ax.set_xlabel("importance")
        ax.set_title(f"{fam} at {shape} ({n} trials)")
        name = f"importance_{fam}_{shape}.png"
        plots.save(plt, fig, out / name)
        md += [f"![importance {fam} {shape}]({name})", ""]
        shown += 1
    return md
