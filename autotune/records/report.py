"""autotune report: PNG plots and a Markdown page from results/<gpu>/ and its Optuna studies."""

from __future__ import annotations

import collections
import io
import os
from pathlib import Path

from ..core.types import Problem, UserError
from .results import iter_records
from .store import atomic_write_bytes, atomic_write_text
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

    db = root / slug / "optuna.db"
    if not os.path.lexists(db):
        return {}
    check_files(db)  # a link planted there would have Optuna's tables written wherever it points
    url = f"sqlite:///{db}"
    out: dict[tuple[str, str], list] = collections.defaultdict(list)
    for s in optuna.get_all_study_summaries(url, include_best_trial=False):
        parts = s.study_name.split("/")
        if len(parts) != 4 or parts[0] != slug:
            continue
        study = optuna.load_study(study_name=s.study_name, storage=url)
        out[(parts[1], parts[2])].append(study)
    return out


def write_report(root: Path | str, slug: str, out_dir: Path | str | None = None, importance_top: int = 3) -> Path:
    """Write the plots and report.md; return the Markdown path."""
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
        "Strict FP32 SGEMM; cuBLAS (`cupy.matmul`) timed in the same process and run as each result.",
        "",
    ]
    md += _shapes_section(plt, out, gpu_name, shapes, best)
    md += _families_section(plt, out, shapes, records)
    md += _trials_section(plt, out, shapes, records, studies)
    md += _progress_section(plt, out, shapes, records, studies)
    md += _importance_section(plt, out, shapes, best, studies, importance_top)
    md += [
        "## Explore the studies",
        "",
        f"`optuna-dashboard sqlite:///{(root / slug / 'optuna.db').as_posix()}` opens every study of this GPU.",
        "",
    ]
    path = out / "report.md"
    atomic_write_text(path, "\n".join(md))
    return path


def _best(record: dict) -> dict:
    """Return the fastest family's entry of a shape's record."""
    return record["families"][fastest(record["families"])]


def _save(plt, fig, path: Path) -> None:
    """Save a figure as a PNG, drawn in memory and written by a rename (atomic_write_bytes).

    A report stopped midway leaves the plots of the last one whole, and a link at `path` is replaced.
    """
    fig.tight_layout()
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=110)
    finally:
        plt.close(fig)
    atomic_write_bytes(path, png.getvalue())


def _shapes_section(plt, out: Path, gpu_name: str, shapes: list[str], best: list[dict]) -> list[str]:
    """Plot and tabulate the best config of each shape against cuBLAS."""
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(shapes)), 4.2))
    x = range(len(shapes))
    ax.bar([i - 0.2 for i in x], [b["gflops"] / 1e3 for b in best], 0.4, label="autotune (best family)")
    ax.bar([i + 0.2 for i in x], [b["cublas"]["gflops"] / 1e3 for b in best], 0.4, label="cuBLAS", color="gray")
    for i, b in enumerate(best):
        ax.text(i - 0.2, b["gflops"] / 1e3, f"{b['ratio']:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x), shapes, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Best tuned kernel vs cuBLAS per shape ({gpu_name})")
    ax.legend(loc="lower right")
    _save(plt, fig, out / "shapes.png")
    md = [
        "## GFLOP/s vs shape",
        "",
        "![shapes](shapes.png)",
        "",
        "| shape | family | TFLOP/s | cuBLAS TFLOP/s | ratio | error | config |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape, b in zip(shapes, best, strict=True):
        md.append(
            f"| {shape} | {b['config']['family']} | {b['gflops'] / 1e3:.1f} | "
            f"{b['cublas']['gflops'] / 1e3:.1f} | {b['ratio']:.2f}x | {b['error']:.1e} | "
            f"`{b['config']['name']}` |"
        )
    return md + [""]


def _families_section(plt, out: Path, shapes: list[str], records: list[dict]) -> list[str]:
    """Plot the best config of each family, for shapes searched with more than one."""
    multi = [(s, r) for s, r in zip(shapes, records, strict=True) if len(r["families"]) > 1]
    if not multi:
        return []
    fams = sorted({f for _s, r in multi for f in r["families"]})
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(multi)), 4.2))
    w = 0.8 / (len(fams) + 1)
    for j, f in enumerate(fams):
        ax.bar(
            [i + j * w for i in range(len(multi))],
            [r["families"][f]["gflops"] / 1e3 if f in r["families"] else 0 for _s, r in multi],
            w,
            label=f,
        )
    ax.bar(
        [i + len(fams) * w for i in range(len(multi))],
        [_best(r)["cublas"]["gflops"] / 1e3 for _s, r in multi],
        w,
        label="cuBLAS",
        color="gray",
    )
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(multi))], [s for s, _r in multi])
    ax.set_ylabel("TFLOP/s")
    ax.set_title("Best config of each family")
    ax.legend(fontsize=8)
    _save(plt, fig, out / "families.png")
    return ["## Best per family", "", "![families](families.png)", ""]


def _trials_section(plt, out: Path, shapes: list[str], records: list[dict], studies: dict) -> list[str]:
    """Plot GFLOP/s of every verified trial with the cuBLAS line, per shape with a study."""
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
        ax.axhline(_best(rec)["cublas"]["gflops"] / 1e3, color="black", ls="--", lw=1, label="cuBLAS")
        ax.set_xlabel("measured config (in order)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{shape}: every verified trial")
        ax.legend(fontsize=7, ncol=2)
        _save(plt, fig, out / f"trials_{shape}.png")
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
        "| shape | study | trials | wall s | best TFLOP/s | x cuBLAS | within 2% of its best at |",
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
            ax.axhline(cublas / 1e3, color="black", ls="--", lw=1, label="cuBLAS")
        by_trial.set_xlabel("trial")
        by_time.set_xlabel("seconds since the study's first trial")
        by_trial.set_ylabel("best TFLOP/s so far")
        by_trial.set_title(f"{shape}: best so far")
        by_time.legend(fontsize=7)
        _save(plt, fig, out / f"progress_{shape}.png")
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
        _save(plt, fig, out / name)
        md += [f"![importance {fam} {shape}]({name})", ""]
        shown += 1
    return md
