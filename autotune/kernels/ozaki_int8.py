"""The INT8 tensor-core GEMMs of the Ozaki moduli: their tiles, checked, and their CUDA source.

Not yet families (no declaration, no search): C = (A B^T) mod m of int8 residues with mma.sync
m16n8k32 s8 -> s32, A M x K and B N x K, both K-major. templates/_ozaki_int8.cu.j2 (`Int8Tile`,
`source`) is the reference: one modulus a launch, synchronous loads. templates/_ozaki_int8_fast.cu.j2
(`FastTile`, `fast_source`) runs every modulus in one launch (blockIdx.z) through a cp.async
pipeline of STAGES tiles and ldmatrix from swizzled shared memory. Each renders for an output
type (`OUTPUTS`, templates/_ozaki_int8_out.cuh.j2), as do the wgmma kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import TEMPLATE_DIR
from .ozaki import K_CHUNK
from .render import render_template, template

TEMPLATE = "_ozaki_int8.cu.j2"
KERNEL = "autotune_ozaki_int8"
FAST_TEMPLATE = "_ozaki_int8_fast.cu.j2"
FAST_KERNEL = "autotune_ozaki_int8_fast"
# The shared memory one block of sm_90 may opt in to (227 KiB).
MAX_SMEM = 227 * 1024
# The product planes' element types: uint8 holds a residue in [0, m) for a quarter of int32's
# traffic, and needs every plane's modulus (m > 0); int32 also has the raw sums (m == 0).
OUTPUTS = ("uint8", "int32")


def output_env(out: str) -> dict:
    """Return the template values that render an INT8 kernel's C as `out` (one of OUTPUTS)."""
    if out not in OUTPUTS:
        raise ValueError(f"product planes of {out!r}: one of {', '.join(OUTPUTS)}")
    return dict(OUT=out)


class _Blocked:
    """What both INT8 tiles share: BM x BN of C on WARPS_M x WARPS_N warps, BK of K a stage."""

    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int

    @property
    def threads(self) -> int:
        """Return the threads of a block."""
        return 32 * self.warps_m * self.warps_n

    def grid(self, m: int, n: int, planes: int = 1) -> tuple[int, int, int]:
        """Return the launch grid: columns of blocks along x, rows along y, one modulus a z."""
        return (-(-n // self.bn), -(-m // self.bm), planes)

    def values(self) -> dict:
        """Return the template values the tile fixes (both templates read these)."""
        return dict(
            BM=self.bm,
            BN=self.bn,
            BK=self.bk,
            WARPS_M=self.warps_m,
            WARPS_N=self.warps_n,
            WM=self.bm // self.warps_m,
            WN=self.bn // self.warps_n,
            MI=self.bm // self.warps_m // 16,
            NI=self.bn // self.warps_n // 8,
            THREADS=self.threads,
            K_CHUNK=K_CHUNK,
        )


@dataclass(frozen=True)
class Int8Tile(_Blocked):
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
    def smem_bytes(self) -> int:
        """Return the shared memory of a block: one stage of A's and B's tiles."""
        return (self.bm + self.bn) * (self.bk + self.pad)


def source(tile: Int8Tile = Int8Tile(), kernel_name: str = KERNEL, out: str = "uint8") -> str:
    """Return the CUDA source of the INT8 kernel for `tile`, C of `out` (OUTPUTS)."""
    return render_template(
        template(TEMPLATE_DIR, TEMPLATE),
        KERNEL_NAME=kernel_name,
        LDS=tile.bk + tile.pad,
        **tile.values(),
        **output_env(out),
    )


@dataclass(frozen=True)
class FastTile(_Blocked):
    """A block tile of the pipelined INT8 kernel: BM x BN of C, BK of K a stage, STAGES stages.

    Args:
        warps_m, warps_n: the warps along M and N; a warp's tile is whole 16 x 16 pieces of C
            (one ldmatrix x4 feeds two 8-column mma tiles).
        stages: tiles of A and B in shared memory at once, STAGES - 1 of them in flight.
    """

    bm: int = 128
    bn: int = 256
    bk: int = 128
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 3

    def __post_init__(self) -> None:
        wm, wn = self.bm // self.warps_m, self.bn // self.warps_n
        chunks = self.bk // 16
        why = [
            (self.bm % self.warps_m == 0 and self.bn % self.warps_n == 0, "warp tiles cover the block tile"),
            (wm % 16 == 0 and wn % 16 == 0, "a warp tile is whole 16 x 16 pieces"),
            (self.bk in (32, 64, 128), "BK is 32, 64 or 128 bytes (the swizzle's rows)"),
            (2 <= self.stages <= 6, "2 to 6 stages"),
            ((self.bm * chunks) % self.threads == 0 and (self.bn * chunks) % self.threads == 0, "chunks split evenly"),
            ((wm // 16) * (wn // 8) * 4 <= 128, "accumulators leave registers for the fragments"),
            (self.smem_bytes <= MAX_SMEM, "shared memory is at most 227 KiB"),
        ]
        bad = [w for ok, w in why if not ok]
        if bad:
            raise ValueError(f"INT8 tile {self}: {'; '.join(bad)}")

    @property
    def smem_bytes(self) -> int:
        """Return the dynamic shared memory of a block: STAGES tiles of A and of B."""
        return self.stages * (self.bm + self.bn) * self.bk


def fast_source(tile: FastTile = FastTile(), kernel_name: str = FAST_KERNEL, out: str = "uint8") -> str:
    """Return the CUDA source of the pipelined INT8 kernel for `tile`, C of `out` (OUTPUTS)."""
    return render_template(
        template(TEMPLATE_DIR, FAST_TEMPLATE),
        KERNEL_NAME=kernel_name,
        STAGES=tile.stages,
        **tile.values(),
        **output_env(out),
    )
