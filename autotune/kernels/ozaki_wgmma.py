"""The INT8 GEMM of the Ozaki moduli on Hopper's warpgroup MMA (wgmma, sm_90a): its tile and source.

Not yet a family: C_q = (A_q B_q^T) mod m_q of int8 residues, every modulus in one launch, with
the interface and output of kernels/ozaki_int8.py's pipelined kernel (`fast_source`), so the
driver (gpu/ozaki.py) launches either. templates/_ozaki_int8_wgmma.cu.j2: one producer warpgroup
copies A's and B's tiles by cp.async into a ring of STAGES stages in the 128-byte-swizzled
K-major layout of wgmma_tf32 (a row of 128 int8 is a row of 32 TF32 floats byte for byte), and
BM / 64 consumer warpgroups multiply them with wgmma m64nBNk32 s8 x s8 -> s32.
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import TEMPLATE_DIR
from .ozaki import K_CHUNK
from .ozaki_int8 import MAX_SMEM, output_env
from .render import render_template, template

WGMMA_TEMPLATE = "_ozaki_int8_wgmma.cu.j2"
WGMMA_KERNEL = "autotune_ozaki_int8_wgmma"
# The target: wgmma and setmaxnreg exist only in sm_90a's architecture-specific features.
WGMMA_ARCH = "sm_90a"
# Bytes of a swizzled row: the 128-byte swizzle's width, 128 int8 of K.
ROW = 128
# Registers a producer thread keeps once it gives the rest to the consumers (setmaxnreg); its
# copy loop is unrolled only twice so that its addresses fit them.
PRODUCER_REGS = 40


@dataclass(frozen=True)
class WgmmaTile:
    """A block tile of the wgmma INT8 kernel: BM x BN of C, BK of K a stage, STAGES stages.

    Args:
        bm: rows of C a block, 64 per consumer warpgroup (wgmma's m).
        bn: columns of C a block: wgmma's n, which for int8 is 8, 16, 24 or a multiple of 16 up to 256.
        bk: int8 of K a stage, whole 128-byte swizzled rows (128 or 256).
        stages: tiles of A and B in shared memory at once.
    """

    bm: int = 128
    bn: int = 256
    bk: int = 128
    stages: int = 4

    def __post_init__(self) -> None:
        why = [
            (self.bm % 64 == 0 and 1 <= self.consumers <= 4, "BM is 64 rows per consumer warpgroup, 1 to 4 of them"),
            (
                self.bn in (8, 16, 24) or (self.bn % 16 == 0 and 32 <= self.bn <= 256),
                "BN (wgmma's n for int8) is 8, 16, 24 or a multiple of 16 up to 256",
            ),
            (self.bk % 32 == 0, "BK is a multiple of 32 (wgmma's k)"),
            (self.bk in (128, 256), "BK is whole 128-byte swizzled rows: 128 or 256"),
            (K_CHUNK % self.bk == 0, "BK divides K_CHUNK"),
            (2 <= self.stages <= 8, "2 to 8 stages"),
            (
                self.bn // 2 + 40 <= self.consumer_regs,
                "accumulators and the rest of a consumer thread fit its registers",
            ),
            (self.smem_bytes + 1024 <= MAX_SMEM, "shared memory is at most 227 KiB"),
        ]
        bad = [w for ok, w in why if not ok]
        if bad:
            raise ValueError(f"wgmma INT8 tile {self}: {'; '.join(bad)}")

    @property
    def consumers(self) -> int:
        """Return the consumer warpgroups: 64 rows of the block tile each."""
        return self.bm // 64

    @property
    def threads(self) -> int:
        """Return the threads of a block: the producer warpgroup and the consumers."""
        return 128 * (self.consumers + 1)

    @property
    def consumer_regs(self) -> int:
        """Return the registers a consumer thread has: what the producer gives up, shared evenly."""
        if self.consumers == 1:  # one consumer warpgroup has the per-thread maximum already
            return 255
        per = (65536 // self.threads) // 8 * 8
        return min(240, (per * self.threads - 128 * PRODUCER_REGS) // (128 * self.consumers) // 8 * 8)

    @property
    def stage_bytes(self) -> int:
        """Return the bytes of a stage: A's BM rows, then B's BN rows, of BK bytes each."""
        return (self.bm + self.bn) * self.bk

    @property
    def smem_bytes(self) -> int:
        """Return the dynamic shared memory of a block: the stages and 1 KiB to align them to 1024.

        The static barriers take 1 KiB more (the dynamic part starts 1024-byte aligned after them).
        """
        return self.stages * self.stage_bytes + 1024

    def grid(self, m: int, n: int, planes: int = 1) -> tuple[int, int, int]:
        """Return the launch grid: columns of blocks along x, rows along y, one modulus a z."""
        return (-(-n // self.bn), -(-m // self.bm), planes)


def tile_env(tile: WgmmaTile) -> dict:
    """Return the template parameters a tile sets, shared by the cp.async- and TMA-fed kernels."""
    return dict(
        BM=tile.bm,
        BN=tile.bn,
        BK=tile.bk,
        STAGES=tile.stages,
        CONSUMERS=tile.consumers,
        THREADS=tile.threads,
        NR=tile.bn // 2,
        ROW=ROW,
        SUBS=tile.bk // ROW,
        STAGE_BYTES=tile.stage_bytes,
        PRODUCER_REGS=PRODUCER_REGS,
        CONSUMER_REGS=tile.consumer_regs,
        K_CHUNK=K_CHUNK,
    )


def wgmma_source(tile: WgmmaTile = WgmmaTile(), kernel_name: str = WGMMA_KERNEL, out: str = "uint8") -> str:
    """Return the CUDA source of the wgmma INT8 kernel for `tile` (compile it for WGMMA_ARCH).

    Args:
        out: C's element type, one of ozaki_int8.OUTPUTS (int32 for the raw sums, m = 0).
    """
    return render_template(
        template(TEMPLATE_DIR, WGMMA_TEMPLATE),
        KERNEL_NAME=kernel_name,
        TMA=False,
        LAG=tile.stages - 2,
        **tile_env(tile),
        **output_env(out),
    )
