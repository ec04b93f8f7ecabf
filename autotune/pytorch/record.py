"""Record the GEMMs a model calls, for `autotune search --shapes-file` to tune offline.

    with record_shapes("shapes.txt"):
        model(x).sum().backward()
    # then: autotune search --shapes-file shapes.txt

The file holds one problem a line as results files are named (`4096x1024x1024_nt`, `_b<batch>`,
`_beta<beta>`, `_<tier>`), its number of calls after a `#`, in the order first called.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ..core.types import Problem
from . import impl


class ShapeLog:
    """The problems seen while recording, each with how often it was called."""

    def __init__(self) -> None:
        self.counts: Counter[Problem] = Counter()  # insertion order: first call first

    def __call__(self, M: int, N: int, K: int, layout: str, batch: int, beta: float, precision: str) -> None:
        if M and N and K:  # an empty product launches nothing: no shape to tune
            self.counts[Problem(M, N, K, layout, batch, beta, precision)] += 1

    @property
    def problems(self) -> list[Problem]:
        """Each problem once, in the order first called."""
        return list(self.counts)

    def text(self) -> str:
        """The shapes file's text (see the module's docstring)."""
        head = "# GEMMs recorded by autotune.pytorch.record_shapes; tune them: autotune search --shapes-file FILE\n"
        width = max((len(p.name) for p in self.counts), default=0)
        return head + "".join(f"{p.name:<{width}}  # {n} call{'s' * (n != 1)}\n" for p, n in self.counts.items())

    def write(self, path: str | Path) -> Path:
        """Write the shapes file to `path` (replacing it). Returns the path."""
        path = Path(path)
        path.write_text(self.text())
        return path


@contextlib.contextmanager
def record_shapes(path: str | Path | None = None) -> Iterator[ShapeLog]:
    """Record each float32 GEMM autotune's operators run inside the block.

    Every float32 product of mm, autotune::matmul and autotune::matmul_out is recorded, on CUDA or
    the CPU, where the kernel runs: eager calls and a compiled model's first runs, not the replays
    of a captured CUDA graph.

    Args:
        path: where to write the shapes file when the block ends (also when it raises, so a
            run cut short keeps what it saw); None writes nothing (read the ShapeLog).

    Returns:
        A context manager giving the ShapeLog it fills.
    """
    log = ShapeLog()
    impl.listen(log)
    try:
        yield log
    finally:
        impl.listen(log, on=False)
        if path is not None:
            log.write(path)
