"""The wgmma INT8 GEMM of the Ozaki moduli fed by tensor maps (TMA): its tile and source.

The kernel of kernels/ozaki_wgmma.py (the same consumers, shared memory layout and output) with
another producer: templates/_ozaki_int8_wgmma_tma.cu.j2 has one thread copy each stage's tiles by
cp.async.bulk.tensor from two tensor maps of the residue planes (gpu/tensor_map.py,
`encode_planes`), counted in bytes on the stage's full barrier, where the cp.async kernel has a
warpgroup copy 16 bytes a thread and wait for its copies LAG stages later.
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import TEMPLATE_DIR
from .ozaki_int8 import output_env
from .ozaki_wgmma import ROW, WgmmaTile, tile_env
from .render import render_template, template

TMA_TEMPLATE = "_ozaki_int8_wgmma_tma.cu.j2"
TMA_KERNEL = "autotune_ozaki_int8_wgmma_tma"


@dataclass(frozen=True)
class WgmmaTmaTile(WgmmaTile):
    """A block tile of the TMA-fed wgmma INT8 kernel: WgmmaTile's fields and rules.

    Its own class so that a tile names its kernel (gpu/ozaki.py's KERNELS). A box is at most 256
    rows, which BM and BN already are.
    """

    def boxes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Return the boxes of A's and B's maps (one plane): (bytes of K, rows), a sub-tile each."""
        return (ROW, self.bm), (ROW, self.bn)


def tma_source(tile: WgmmaTmaTile = WgmmaTmaTile(), kernel_name: str = TMA_KERNEL, out: str = "uint8") -> str:
    """Return the CUDA source of the TMA-fed wgmma INT8 kernel for `tile` (compile it for sm_90a).

    Its arguments: M, N, K, C (of `out`, one of ozaki_int8.OUTPUTS), ldc, C's plane stride, the
    moduli, then the maps of A's and B's residues (boxes as `tile.boxes()`), as __grid_constant__
    values.
    """
    return render_template(
        template(TEMPLATE_DIR, TMA_TEMPLATE), KERNEL_NAME=kernel_name, TMA=True, **tile_env(tile), **output_env(out)
    )
