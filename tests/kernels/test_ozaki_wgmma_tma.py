"""The TMA-fed wgmma INT8 kernel of the Ozaki moduli (templates/_ozaki_int8_wgmma_tma.cu.j2) without a GPU.

Its copies are replayed as the PTX ISA defines a tiled cp.async.bulk.tensor with the 128-byte
swizzle (the whole box written, zeros out of bounds, the swizzle a function of the shared address)
in front of the cp.async kernel's replayed consumers (tests/kernels/test_ozaki_wgmma.py): every C
element must equal NumPy's product modulo m. It renders and NVRTC builds it for sm_90a without
spills; the maps of the residue planes are encoded with the arguments asserted here (the driver's
call mocked), and the launch passes what the kernel's parameters are.
"""

import ctypes
import re
from types import SimpleNamespace

import numpy as np
import pytest

from autotune.gpu import tensor_map
from autotune.gpu.compile import compile_source
from autotune.kernels.family import TEMPLATE_DIR
from autotune.kernels.ozaki_passes import residue_pitch
from autotune.kernels.ozaki_wgmma import ROW, WGMMA_ARCH, WgmmaTile, wgmma_source
from autotune.kernels.ozaki_wgmma_tma import TMA_KERNEL, TMA_TEMPLATE, WgmmaTmaTile, tma_source
from autotune.kernels.sass import find_cuobjdump
from tests.kernels import test_ozaki_wgmma as cp_async_kernel
from tests.kernels.test_ozaki_int8_model import int8_case, int8_product, int8s, tile_id

# The producer's lines that the replay's `tma_copy` transcribes.
PRODUCER_LINES = (
    "at_bar_init(full0 + 8 * s, 1);",
    "const int s = kt % {{ STAGES }}, k0 = kt * {{ BK }};",
    "if (kt >= {{ STAGES }}) at_bar_wait(empty0 + 8 * s, ((kt / {{ STAGES }}) - 1) & 1);",
    "at_bar_expect(full, {{ STAGE_BYTES }});",
    "for (int j = 0; j < {{ SUBS }}; ++j) {",
    "at_tma_load3(st + j * {{ BM * ROW }}, tmap_a, k0 + {{ ROW }} * j, bm, q, full);",
    "at_tma_load3(st + {{ BM * BK }} + j * {{ BN * ROW }}, tmap_b, k0 + {{ ROW }} * j, bn, q, full);",
    '{% include "_ozaki_int8_wgmma_prologue.cuh.j2" %}',
    '{% include "_ozaki_int8_wgmma_consumer.cuh.j2" %}',
)


def test_the_replay_copies_the_templates_lines():
    files = (TMA_TEMPLATE, "_ozaki_int8_wgmma_prologue.cuh.j2")
    text = cp_async_kernel._flat(" ".join((TEMPLATE_DIR / name).read_text() for name in files))
    missing = [line for line in PRODUCER_LINES if cp_async_kernel._flat(line) not in text]
    assert not missing, missing


def swizzled(addr):
    """The 128-byte swizzle of a shared-memory address: bits 4-6 XORed with bits 7-9."""
    return addr ^ (((addr >> 7) & 7) << 4)


def tma_copy(smem, s, x, rows_tile, bk, r0, k0, expected=None):
    """The producer's boxes of one tile at `s`: BK / 128 of 128 bytes x rows_tile rows; its writes.

    A box writes all its bytes (zeros past the rows and K) at dst + 128 r + b, swizzled.
    """
    rows, K = x.shape
    writes = []
    for j in range(bk // ROW):
        dst, kx = s + j * rows_tile * ROW, k0 + ROW * j
        assert dst % 1024 == 0, "the 128-byte swizzle's boxes land 1024-byte aligned"
        for r in range(rows_tile):
            row = np.zeros(ROW, np.int8)
            if r0 + r < rows and kx < K:
                got = x[r0 + r, kx : kx + ROW]
                row[: len(got)] = got
            for c in range(ROW // 16):
                at = swizzled(dst + r * ROW + 16 * c)
                smem[at : at + 16] = row[16 * c : 16 * c + 16]
                writes.append(at)
    return writes


def replay(tile, a, b, m, k_chunk=None):
    kw = {} if k_chunk is None else {"k_chunk": k_chunk}
    return cp_async_kernel.replay(tile, a, b, m, copy=tma_copy, **kw)


SMALL = (WgmmaTmaTile(64, 16, 128, 2), WgmmaTmaTile(128, 24, 256, 3), WgmmaTmaTile(64, 48, 128, 4))


@pytest.mark.parametrize("tile", SMALL, ids=tile_id)
@pytest.mark.parametrize("shape", [(1, 1, 1), (70, 45, 100), (130, 50, 300)])
@pytest.mark.parametrize("m", [0, 251])
def test_the_replayed_kernel_is_exact(tile, shape, m):
    """Boxes past K (BK 256 with K = 100: the second box wholly out) and past the rows are zeros."""
    a, b, want = int8_case(shape, m)
    assert np.array_equal(replay(tile, a, b, m), want)


def test_the_default_tile_replayed_with_tails_and_the_chunk_reduction():
    rng = np.random.default_rng(5)
    a, b = int8s(rng, 130, 272), int8s(rng, 260, 272)
    assert np.array_equal(replay(WgmmaTmaTile(), a, b, 253, k_chunk=128), int8_product(a, b, 253))


def test_boxes_written_without_the_swizzle_are_caught(monkeypatch):
    """The replay can fail: a map encoded without the swizzle does not match the descriptors."""
    rng = np.random.default_rng(2)
    a, b = int8s(rng, 64, 128), int8s(rng, 16, 128)
    monkeypatch.setitem(globals(), "swizzled", lambda addr: addr)
    assert not np.array_equal(replay(SMALL[0], a, b, 0), int8_product(a, b, 0))
    monkeypatch.undo()
    assert np.array_equal(replay(SMALL[0], a, b, 0), int8_product(a, b, 0))


# --- the source and NVRTC -----------------------------------------------------------------------

TILES = (
    WgmmaTmaTile(),
    WgmmaTmaTile(64, 128, 128, 6),
    WgmmaTmaTile(128, 128, 256, 3),
    WgmmaTmaTile(256, 128, 128, 4),
    WgmmaTmaTile(64, 48, 128, 4),
)


def test_a_tile_names_its_kernel_and_keeps_the_wgmma_tiles_rules():
    t = WgmmaTmaTile()
    assert t != WgmmaTile() and (t.bm, t.bn, t.bk, t.stages) == (128, 256, 128, 4)
    assert t.boxes() == ((128, 128), (128, 256)) and WgmmaTmaTile(64, 48, 256, 2).boxes() == ((128, 64), (128, 48))
    with pytest.raises(ValueError, match="wgmma INT8 tile WgmmaTmaTile.*128 or 256"):
        WgmmaTmaTile(bk=64)


def test_it_renders_each_tile_with_the_cp_async_kernels_consumers():
    for tile in TILES:
        src = tma_source(tile)
        assert f"BM = {tile.bm}, BN = {tile.bn}, BK = {tile.bk}, {tile.stages} stages" in src and "{{" not in src
        assert f"wgmma.mma_async.sync.aligned.m64n{tile.bn}k32.s32.s8.s8" in src
        assert "cp.async.bulk.tensor.3d" in src and "cp.async.commit_group" not in src
        assert f"at_bar_expect(full, {tile.stage_bytes});" in src
        # Everything from the consumers' branch on is the cp.async kernel's, byte for byte.
        plain = wgmma_source(WgmmaTile(tile.bm, tile.bn, tile.bk, tile.stages))
        assert src[src.index("\n    } else {\n") :] == plain[plain.index("\n    } else {\n") :]


@pytest.mark.parametrize("tile", TILES, ids=tile_id)
def test_it_compiles_for_sm_90a_without_spills(tile):
    cp_async_kernel.assert_builds_without_spills(tma_source(tile), TMA_KERNEL, tile)


def test_its_int32_render_compiles_too():
    """int32 planes, the only type with the raw sums (m = 0) the device tests check the GEMM by."""
    tile, wide = WgmmaTmaTile(), tma_source(out="int32")
    assert "typedef int at_out;" in wide and "typedef unsigned char at_out;" in tma_source()
    cp_async_kernel.assert_builds_without_spills(wide, TMA_KERNEL, tile)


def test_its_machine_code_copies_by_the_tensor_memory_accelerator():
    import subprocess
    import tempfile

    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compile_source(tma_source(), WGMMA_ARCH, TMA_KERNEL).cubin)
        f.flush()
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    assert "UTMALDG.3D" in sass and "LDGSTS" not in sass
    assert re.search(r"IGMMA\.64x256x32\.S8\.S8", sass), "wgmma m64n256k32 s8"
    # The uint8 planes: a row's pair as one 2-byte store, a byte at the edges; no 4- or 8-byte store.
    stores = set(re.findall(r"\bSTG\.E[.\w]*", sass))
    assert stores == {"STG.E.U16", "STG.E.U8"}, stores


# --- the maps and the launch --------------------------------------------------------------------


class _Driver:
    """cuTensorMapEncodeTiled mocked: records its arguments and marks each map's first word."""

    def __init__(self, result=0):
        self.calls, self.result = [], result

    def __call__(self, tmap, dtype, rank, ptr, dims, strides, box, unit, interleave, swizzle, l2, fill):
        self.calls.append(
            dict(
                dtype=dtype, rank=rank, ptr=ptr, dims=tuple(dims[:rank]), strides=tuple(strides[: rank - 1]),
                box=tuple(box[:rank]), unit=tuple(unit[:rank]), interleave=interleave, swizzle=swizzle,
                l2=l2, fill=fill,
            )
        )  # fmt: skip
        ctypes.c_uint64.from_address(tmap).value = 0xA0 + len(self.calls)
        return self.result


@pytest.fixture
def driver(monkeypatch):
    fake = _Driver()
    monkeypatch.setattr(tensor_map, "_encode_tiled", lambda: fake)
    return fake


def test_a_residue_planes_map_is_3_d_uint8_swizzled_zero_filled(driver):
    """K = 1000 of 7 planes x 300 rows, pitch 1008: dims (K, rows, planes), strides in bytes,
    boxes of 128 bytes x BM rows x 1 plane, UINT8 (cuda.h has no INT8; 0), 128-byte swizzle,
    zeros out of bounds."""
    assert residue_pitch(1000) == 1008 and all(residue_pitch(k) % 16 == 0 for k in range(1, 300))
    tmap = tensor_map.encode_planes(4096, 1000, 300, 1008, 7, WgmmaTmaTile().boxes()[0])
    assert tmap[0] == 0xA1 and ctypes.sizeof(tmap) == 128
    assert driver.calls == [
        dict(
            dtype=0, rank=3, ptr=4096, dims=(1000, 300, 7), strides=(1008, 300 * 1008), box=(128, 128, 1),
            unit=(1, 1, 1), interleave=0, swizzle=3, l2=2, fill=0,
        )
    ]  # fmt: skip


def test_the_tf32_map_is_encoded_as_before(driver):
    tensor_map.encode(8192, 100, 200, 104, (32, 256))
    assert driver.calls[0] | {"ptr": 0} == dict(
        dtype=11, rank=2, ptr=0, dims=(100, 200), strides=(416,), box=(32, 256), unit=(1, 1),
        interleave=0, swizzle=3, l2=2, fill=0,
    )  # fmt: skip


def test_a_map_the_driver_refuses_is_an_error_naming_the_planes(monkeypatch):
    monkeypatch.setattr(tensor_map, "_encode_tiled", lambda: _Driver(result=1))
    with pytest.raises(ValueError, match=r"CUresult 1\) for 7 x 300 x 1000 int8, pitch 1008, box \(128, 128, 1\)"):
        tensor_map.encode_planes(4096, 1000, 300, 1008, 7, (128, 128))
    assert tensor_map.planes_mappable(4096, 1008) and not tensor_map.planes_mappable(4096, 1000)
    assert not tensor_map.planes_mappable(4100, 1008) and not tensor_map.planes_mappable(4096, 0)


def _planes(ptr, n, v, pitch):
    return SimpleNamespace(
        shape=(n, v, pitch), strides=(v * pitch, pitch, 1), dtype=np.dtype(np.int8), data=SimpleNamespace(ptr=ptr)
    )


def _kernel_params(src):
    """The kernel's parameters as (C type, name), from its signature."""
    sig = src[src.index(f"{TMA_KERNEL}(") + len(TMA_KERNEL) + 1 : src.index(")\n{")]
    return [tuple(p.replace("__restrict__", "").replace("const", "").split()[-2:]) for p in sig.split(",")]


def test_the_launch_passes_the_kernels_parameters(driver, monkeypatch):
    """tma_products: the grid, block and shared memory of the tile, and a value of each parameter's
    size in its order (the maps as 128 bytes by value), the maps of A's and B's planes."""
    import cupy as cp

    from autotune.gpu import ozaki

    launched = []

    def launch(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_void_p * 9).from_address(params)
        values = [ctypes.c_int32.from_address(ptrs[i]).value for i in (0, 1, 2, 4)]
        values += [ctypes.c_int64.from_address(ptrs[i]).value for i in (3, 5, 6)]
        maps = [ctypes.c_uint64.from_address(ptrs[i]).value for i in (7, 8)]
        launched.append(((fn, gx, gy, gz, bx, by, bz, smem, stream), values, maps))

    monkeypatch.setattr(cp.cuda.driver, "launchKernel", launch)
    monkeypatch.setattr(cp.cuda, "get_current_stream", lambda: SimpleNamespace(ptr=77))
    tile = WgmmaTmaTile(64, 128, 256, 3)
    a, b = _planes(1 << 20, 6, 300, 1008), _planes(1 << 24, 6, 520, 1008)
    c, mods = SimpleNamespace(data=SimpleNamespace(ptr=5 << 20)), SimpleNamespace(data=SimpleNamespace(ptr=6 << 20))
    tensor_map.cached_planes._cache.clear()
    ozaki.tma_products(SimpleNamespace(ptr=99), tile, a, b, 1000, c, mods)
    ((grid, values, maps),) = launched
    assert grid == (99, 5, 5, 6, 2 * 128, 1, 1, tile.smem_bytes, 77)  # one consumer warpgroup
    assert values == [300, 520, 1000, 520, 5 << 20, 300 * 520, 6 << 20] and maps == [0xA1, 0xA2]
    assert [(call["ptr"], call["dims"], call["box"]) for call in driver.calls] == [
        (1 << 20, (1000, 300, 6), (128, 64, 1)),
        (1 << 24, (1000, 520, 6), (128, 128, 1)),
    ]
    assert _kernel_params(tma_source(tile)) == [
        ("int", "M"), ("int", "N"), ("int", "K"), ("at_out*", "C"), ("int", "ldc"), ("long", "sc"),
        ("int*", "mods"), ("at_tensor_map", "tmap_a"), ("at_tensor_map", "tmap_b"),
    ]  # fmt: skip
    # Planes a map cannot describe are refused before anything is launched.
    odd = SimpleNamespace(**{**vars(a), "shape": (6, 300, 1000), "strides": (300000, 1000, 1)})
    with pytest.raises(ValueError, match="not contiguous int8 of 16-byte rows"):
        ozaki.tma_products(SimpleNamespace(ptr=99), tile, odd, b, 1000, c, mods)
    assert len(launched) == 1


def test_the_driver_runs_it_by_name_only_with_its_own_tile():
    """gpu/ozaki.py: KERNELS["wgmma_tma"], the default on sm_90; a cp.async kernel's tile is refused and
    the other way round (a WgmmaTmaTile is a WgmmaTile), before anything is built."""
    from autotune.gpu.ozaki import KERNELS, OzakiGemm, default_kernel

    assert KERNELS["wgmma_tma"] is WgmmaTmaTile and default_kernel("sm_90") == "wgmma_tma"
    with pytest.raises(ValueError, match="the wgmma_tma kernel takes a WgmmaTmaTile"):
        OzakiGemm(8, WgmmaTile(), arch="sm_90", kernel="wgmma_tma")
    with pytest.raises(ValueError, match="the wgmma kernel takes a WgmmaTile"):
        OzakiGemm(8, WgmmaTmaTile(), arch="sm_90", kernel="wgmma")
