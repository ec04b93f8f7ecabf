"""What the compiler made of a kernel: SASS instruction mix of the whole kernel and its main loop.

Needs `cuobjdump` (CUDA toolkit, or the nvidia-cuda-cuobjdump wheel); no GPU.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

_INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_TARGET = re.compile(r"0x([0-9a-f]+)")


@dataclass
class SassStats:
    """Instruction counts of a whole kernel and of its main loop."""

    total: collections.Counter
    loop: collections.Counter  # the leanest backward-branch range holding the most FFMA

    @staticmethod
    def _share(c: collections.Counter, pred) -> float:
        n = sum(c.values())
        return sum(v for k, v in c.items() if pred(k)) / n if n else 0.0

    def summary(self) -> dict:
        """Return the counts that matter for an SGEMM's main loop, as a plain dict."""
        lds = {k: v for k, v in self.loop.items() if k.startswith("LDS")}
        return {
            "instructions": sum(self.total.values()),
            "loop_instructions": sum(self.loop.values()),
            "loop_ffma": self.loop.get("FFMA", 0),
            "loop_ffma_share": round(self._share(self.loop, lambda k: k == "FFMA"), 4),
            "loop_lds": lds,
            "loop_lds128_share_of_lds": round(lds.get("LDS.128", 0) / sum(lds.values()), 4) if lds else None,
            "local_memory": sum(v for k, v in self.total.items() if k.startswith(("LDL", "STL"))),
            "loop_top": self.loop.most_common(12),
        }


def find_cuobjdump() -> str | None:
    """Return the path of cuobjdump (on PATH, the CUDA toolkit, or the wheel), or None."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    patterns = ["/usr/local/cuda/bin/cuobjdump"]
    try:  # the nvidia-cuda-cuobjdump wheel: site-packages/nvidia/cu13/bin/cuobjdump
        import nvidia

        patterns += [os.path.join(p, "cu*", "bin", "cuobjdump") for p in nvidia.__path__]
    except ImportError:
        pass
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def parse(sass: str) -> SassStats:
    """Return the instruction mix of a `cuobjdump --dump-sass` listing and of its hottest loop."""
    instrs = []
    for line in sass.splitlines():
        m = _INSTR.match(line)
        if m:
            instrs.append((int(m.group(1), 16), m.group(3), m.group(4)))
    total = collections.Counter(op for _, op, _ in instrs)
    loops = []  # (first, last) address of each backward branch's range
    for addr, op, args in instrs:
        t = _TARGET.search(args) if op == "BRA" else None
        if t and int(t.group(1), 16) < addr:
            loops.append((int(t.group(1), 16), addr))
    best = collections.Counter()
    for first, last in loops:
        # Innermost loops only: a persistent kernel's loop over its tiles holds the main loop
        # (twice, with more FFMA than either) and must not stand for it.
        if any(first < f <= e <= last for f, e in loops):
            continue
        body = collections.Counter(o for a, o, _ in instrs if first <= a <= last)
        # The hottest loop has the most FFMA; of equals (a loop built twice, e.g. for a
        # vector and a scalar load path), the leanest one is the fast path.
        if (body.get("FFMA", 0), -sum(body.values())) > (best.get("FFMA", 0), -sum(best.values())):
            best = body
    return SassStats(total, best)


def analyze_cubin(cubin: bytes, kernel: str, cuobjdump: str | None = None) -> SassStats:
    """Return the SASS statistics of `kernel` in `cubin`.

    Raises:
        FileNotFoundError: No cuobjdump was found.
        subprocess.CalledProcessError: cuobjdump failed.
    """
    tool = cuobjdump or find_cuobjdump()
    if not tool:
        raise FileNotFoundError("cuobjdump not found (CUDA toolkit or the nvidia-cuda-cuobjdump wheel)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        # cuobjdump runs nvdisasm, which the wheels install beside it.
        env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
        out = subprocess.run(
            [tool, "--dump-sass", "--function", kernel, f.name], capture_output=True, text=True, check=True, env=env
        ).stdout
    return parse(out)
