"""The INT8 tensor-core GEMM of one Ozaki modulus: its tile, checked, and its CUDA source rendered.

templates/_ozaki_int8.cu.j2, not yet a family (no declaration, no search): C = (A B^T) mod m of
int8 residues with mma.sync m16n8k32 s8 -> s32, A M x K and B N x K, both K-major.
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import TEMPLATE_DIR
from .ozaki import K_CHUNK
from .render import render_template, template

TEMPLATE = "_ozaki_int8.cu.j2"
KERNEL = "autotune_ozaki_int8"


@dataclass(frozen=True)
class Int8Tile:
    """A block tile of the INT8 kernel: BM x BN of C, BK of K a stage, WARPS_M x WARPS_N warps.

    Args:
        pad: bytes after each shared row of BK: 16 puts a fragment read's 8 rows on 8 bank groups.
    """

    bm: int = 128
    bn: int = 128
    bk: int = 64
    warps_m: int = 2
    warps_n: int = 2
    pad: int = 16

    def __post_init__(self) -> None:
        wm, wn = self.bm // self.warps_m, self.bn // self.warps_n
        why = [
            (self.bm % self.warps_m == 0 and self.bn % self.warps_n == 0, "warp tiles cover the block tile"),
            (wm % 16 == 0 and wn % 8 == 0, "a warp tile is whole 16 x 8 mma tiles"),
            (self.bk % 32 == 0 and K_CHUNK % self.bk == 0, "a stage is whole k-steps of 32 dividing K_CHUNK"),
            (self.pad % 16 == 0, "shared rows stay 16-byte aligned"),
            ((wm // 16) * (wn // 8) * 4 <= 128, "accumulators leave registers for the fragments"),
            (self.smem_bytes <= 48 * 1024, "static shared memory is at most 48 KiB"),
        ]
        bad = [w for ok, w in why if not ok]
        if bad:
            raise ValueError(f"INT8 tile {self}: {'; '.join(bad)}")

    @property
    def threads(self) -> int:
        """Return the threads of a block."""
        return 32 * self.warps_m * self.warps_n

    @property
    def smem_bytes(self) -> int:
        """Return the shared memory of a block: one stage of A's and B's tiles."""
        return (self.bm + self.bn) * (self.bk + self.pad)

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        """Return the launch grid for an M x N C: columns of blocks along x, rows along y."""
        return (-(-n // self.bn), -(-m // self.bm), 1)


def source(tile: Int8Tile = Int8Tile(), kernel_name: str = KERNEL) -> str:
    """Return the CUDA source of the INT8 kernel for `tile`."""
    return render_template(
        template(TEMPLATE_DIR, TEMPLATE),
        KERNEL_NAME=kernel_name,
        BM=tile.bm,
        BN=tile.bn,
        BK=tile.bk,
        WARPS_M=tile.warps_m,
        WARPS_N=tile.warps_n,
        WM=tile.bm // tile.warps_m,
        WN=tile.bn // tile.warps_n,
        MI=tile.bm // tile.warps_m // 16,
        NI=tile.bn // tile.warps_n // 8,
        LDS=tile.bk + tile.pad,
        THREADS=tile.threads,
        K_CHUNK=K_CHUNK,
    )
