"""The report's per-tier figures: each shape's best and each family against the tier's baseline.

Shapes are rows of a horizontal chart, so a name is read level and a figure grows down, not
across: at most ROWS rows a column and COLUMNS columns a figure (about 1,500 x 1,000 pixels at
most), a tier with more shapes in further figures. report.py writes the Markdown around them.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from .store import atomic_write_bytes

ROWS = 25  # shapes in a column
COLUMNS = 3  # columns in a figure
DPI = 110
_ROW_IN, _COLUMN_IN, _MARGIN_IN = 0.34, 4.8, 1.3  # a row's height, a column's width, title and axis


def save(plt, fig, path: Path) -> None:
    """Save a figure as a PNG, drawn in memory and written by a rename (atomic_write_bytes).

    A report stopped midway leaves the plots of the last one whole, and a link at `path` is replaced.
    """
    fig.tight_layout()
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=DPI)
    finally:
        plt.close(fig)
    atomic_write_bytes(path, png.getvalue())


def _figures(plt, n: int, least_in: float = 0.0):
    """Yield (figure, [(axes, first row, rows)]) laying `n` rows (at least 1) out, figure by figure.

    A figure is at least `least_in` inches high (room for a legend).
    """
    for start in range(0, n, ROWS * COLUMNS):
        count = min(n - start, ROWS * COLUMNS)
        cols = max(1, math.ceil(count / ROWS))
        per = math.ceil(count / cols) if count else 1
        size = (max(6.4, cols * _COLUMN_IN), max(least_in, per * _ROW_IN + _MARGIN_IN))
        fig, axes = plt.subplots(1, cols, figsize=size, squeeze=False)
        panels = [(ax, start + j * per, min(per, count - j * per)) for j, ax in enumerate(axes[0])]
        yield fig, panels


def _names(stem: str, figures: int) -> list[str]:
    return [f"{stem}.png" if i == 0 else f"{stem}_{i + 1}.png" for i in range(figures)]


def shapes_figures(plt, out: Path, stem: str, title: str, rows: list[dict]) -> list[str]:
    """Draw each shape's best and baseline TFLOP/s as bars, the ratio beside; return the files.

    Args:
        rows: Per shape, in order: "label", "tflops", "base_tflops", "ratio", "throttled".
    """
    top = max([max(r["tflops"], r["base_tflops"]) for r in rows] or [1.0])
    figures = list(_figures(plt, len(rows)))
    names = _names(stem, len(figures))
    for (fig, panels), name in zip(figures, names, strict=True):
        for ax, first, count in panels:
            part = rows[first : first + count]
            y = range(len(part))
            ax.barh([i - 0.2 for i in y], [r["tflops"] for r in part], 0.4, label="best kernel", color="tab:blue")
            ax.barh([i + 0.2 for i in y], [r["base_tflops"] for r in part], 0.4, label="baseline", color="0.6")
            for i, r in enumerate(part):
                mark = "*" if r["throttled"] else ""
                ax.text(r["tflops"], i - 0.2, f" {r['ratio']:.2f}x{mark}", va="center", fontsize=8)
            ax.set_yticks(list(y), [r["label"] for r in part], fontsize=8)
            ax.set_ylim(len(part) - 0.5, -0.5)  # the first shape at the top
            ax.set_xlim(0, top * 1.22)  # room for the ratio
            ax.set_xlabel("TFLOP/s", fontsize=9)
            ax.grid(axis="x", lw=0.4, alpha=0.5)
        panels[0][0].legend(fontsize=8, loc="upper right")  # the small shapes' short bars are at the top
        fig.suptitle(title, fontsize=10)
        save(plt, fig, out / name)
    return names


def families_figures(plt, out: Path, stem: str, title: str, rows: list[dict]) -> list[str]:
    """Draw each family's best at each shape as a point (x baseline); return the files.

    Args:
        rows: Per shape, in order: "label" and "ratios" (family -> ratio to the baseline).
    """
    fams = sorted({f for r in rows for f in r["ratios"]})
    markers = "osD^v<>phX"
    top = max([v for r in rows for v in r["ratios"].values()] + [1.0])
    figures = list(_figures(plt, len(rows), least_in=0.2 * len(fams) + _MARGIN_IN))
    names = _names(stem, len(figures))
    for (fig, panels), name in zip(figures, names, strict=True):
        for ax, first, count in panels:
            part = rows[first : first + count]
            for j, fam in enumerate(fams):
                at = [(r["ratios"][fam], i) for i, r in enumerate(part) if fam in r["ratios"]]
                ax.plot([x for x, _ in at], [i for _, i in at], markers[j % len(markers)], ms=5, label=fam)
            ax.axvline(1.0, color="black", lw=0.8, ls="--")
            ax.set_yticks(range(len(part)), [r["label"] for r in part], fontsize=8)
            ax.set_ylim(len(part) - 0.5, -0.5)
            ax.set_xlim(0, top * 1.08)
            ax.set_xlabel("x baseline", fontsize=9)
            ax.grid(axis="both", lw=0.4, alpha=0.5)
        panels[-1][0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))  # beside: no point hidden
        fig.suptitle(title, fontsize=10)
        save(plt, fig, out / name)
    return names
