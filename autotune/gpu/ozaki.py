"""Ozaki scheme II on the device: FP32 GEMM as scaling, one INT8 GEMM a modulus, and the CRT.

The three stages of kernels/ozaki.py's `gemm` as CUDA kernels (kernels/ozaki_passes.py's scaling
and reconstruction, kernels/ozaki_int8.py's GEMMs), driven through CuPy; the dispatch reaches it
through gpu/ozaki_route.py. The GEMMs run on the pipelined kernel, every modulus in one launch
("fast"), on the reference kernel, one launch a modulus ("reference"), or on Hopper's wgmma, every
modulus in one launch (sm_90a only), its tiles copied by cp.async ("wgmma") or by the tensor memory
accelerator from maps of the residue planes ("wgmma_tma"). Every stage is exact, so C equals
ozaki.gemm's bit for bit (the one rounding is the last), given the same exponents: the norms are
summed in another order than NumPy's, which can move an exponent only where a norm lies within
about 2^-50 of a power-of-two boundary.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import NamedTuple

import cupy as cp
import numpy as np

from ..kernels.ozaki import fits, moduli
from ..kernels.ozaki_choice import MAX_MODULI
from ..kernels.ozaki_int8 import FAST_KERNEL, FastTile, Int8Tile, fast_source
from ..kernels.ozaki_int8 import KERNEL as INT8_KERNEL
from ..kernels.ozaki_int8 import source as int8_source
from ..kernels.ozaki_passes import (
    CRT_BLOCK,
    CRT_KERNEL,
    EXP_BLOCK,
    RESK_BLOCK,
    SCALE_KERNEL,
    crt_grid,
    crt_source,
    exp_chunk,
    exp_grid,
    res_grid,
    residue_pitch,
    scale_source,
)
from ..kernels.ozaki_wgmma import WGMMA_ARCH, WGMMA_KERNEL, WgmmaTile, wgmma_source
from ..kernels.ozaki_wgmma_tma import TMA_KERNEL, WgmmaTmaTile, tma_source
from . import tensor_map
from .compile import compile_source

# The INT8 GEMM kernels by name: their tile classes.
KERNELS = {"fast": FastTile, "reference": Int8Tile, "wgmma": WgmmaTile, "wgmma_tma": WgmmaTmaTile}
# The kernels that take every modulus in one launch: their sources and entries.
ONE_LAUNCH = {
    "fast": (fast_source, FAST_KERNEL),
    "wgmma": (wgmma_source, WGMMA_KERNEL),
    "wgmma_tma": (tma_source, TMA_KERNEL),
}


def default_kernel(arch: str) -> str:
    """Return the INT8 kernel that OzakiGemm runs on `arch` (e.g. "sm_90") unless told: its fastest.

    Hopper's TMA-fed wgmma kernel (H200, 8192^3: 1259-1408 INT8 TOPS against the cp.async-fed
    wgmma kernel's 661-714 and the fast kernel's 516-520), else the fast kernel.
    """
    return "wgmma_tma" if arch in ("sm_90", "sm_90a") else "fast"


@dataclass(frozen=True)
class Residues:
    """One operand scaled: its exponents (int32, V) and residues (int8, n x V x pitch, K-major)."""

    e: cp.ndarray
    r: cp.ndarray
    k: int

    @property
    def pitch(self) -> int:
        """Return the bytes between a plane's rows."""
        return int(self.r.shape[2])


def _module(source: str, kernel: str, arch: str) -> cp.cuda.function.Module:
    """Return `source` compiled for `arch` and loaded.

    Args:
        kernel: the entry whose resources NVRTC reports.
    """
    mod = cp.cuda.function.Module()
    mod.load(compile_source(source, arch, kernel).cubin)
    return mod


def int8_function(source: str, name: str, arch: str, smem_bytes: int):
    """Return kernel `name` of `source` compiled for `arch` and loaded, opted in to `smem_bytes`.

    The opt-in is to that much dynamic shared memory, where it passes the default 48 KiB.
    """
    fn = _module(source, name, arch).get_function(name)
    if smem_bytes > 48 * 1024:  # above the default, a kernel must opt in
        attr = cp.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        cp.cuda.driver.funcSetAttribute(fn.ptr, attr, smem_bytes)
    return fn


def _planes_map(r: cp.ndarray, k: int, box: tuple[int, int]) -> tensor_map.TensorMap:
    """Return the map of int8 planes `r` (n x V x pitch, K = k) in `box`es; zeros where k = 0."""
    n, v, pitch = r.shape
    if k == 0:
        return tensor_map.ZEROS
    if r.dtype != cp.int8 or r.strides != (v * pitch, pitch, 1) or not tensor_map.planes_mappable(r.data.ptr, pitch):
        raise ValueError(f"{r.dtype} planes {r.shape}, strides {r.strides}: not contiguous int8 of 16-byte rows")
    return tensor_map.cached_planes(r.data.ptr, k, v, pitch, n, box)


def tma_products(fn, tile: WgmmaTmaTile, a: cp.ndarray, b: cp.ndarray, k: int, c: cp.ndarray, mods: cp.ndarray):
    """Launch the TMA-fed kernel `fn` on the current stream: c[q] = (a[q] b[q]^T) mod mods[q].

    Args:
        a, b: int8 planes q x M x pitch and q x N x pitch, contiguous, pitch a multiple of 16 and
            at least k (the bytes past k are not read).
        c: q x M x N, contiguous, of the type `fn` was rendered for (uint8, or int32 for
            the raw sums: mods 0); mods: int32, q of them.
    """
    (q, m, _), nn = a.shape, b.shape[1]
    box_a, box_b = tile.boxes()
    args = [ctypes.c_int32(x) for x in (m, nn, k)] + [ctypes.c_uint64(c.data.ptr), ctypes.c_int32(nn)]
    args += [ctypes.c_int64(m * nn), ctypes.c_uint64(mods.data.ptr), _planes_map(a, k, box_a), _planes_map(b, k, box_b)]
    # CuPy's call cannot pass a map by value: cuLaunchKernel, which copies the values it points to.
    params = (ctypes.c_void_p * len(args))(*(ctypes.addressof(x) for x in args))
    gx, gy, gz = tile.grid(m, nn, q)
    stream, smem = cp.cuda.get_current_stream().ptr, tile.smem_bytes
    cp.cuda.driver.launchKernel(fn.ptr, gx, gy, gz, tile.threads, 1, 1, smem, stream, ctypes.addressof(params), 0)


def _vectors(x: cp.ndarray, axis: int) -> tuple[int, int, int, int]:
    """Return (V, K, sv, sk): the vectors of 2-D float32 `x` along `axis`, strides in elements."""
    if x.dtype != cp.float32 or x.ndim != 2:
        raise ValueError(f"a 2-D float32 operand, not {x.dtype} with {x.ndim} dimensions")
    if any(s % 4 or s < 0 for s in x.strides):
        raise ValueError(f"strides {x.strides} are not whole non-negative floats")
    sv, sk = x.strides[axis] // 4, x.strides[1 - axis] // 4
    return int(x.shape[axis]), int(x.shape[1 - axis]), sv, sk


def _float4_rows(x: cp.ndarray, sv: int) -> bool:
    """Return whether each vector of `x` (`sv` floats apart) starts 16-byte aligned, for float4."""
    return x.data.ptr % 16 == 0 and sv % 4 == 0


def stats_pass(arch: str):
    """Return the check's norms pass (sq, exp): the scaling's, its sum-of-squares kernel with Stats.

    One source for DeviceGuard and DeviceElement, so one compile; for exponent_pass.
    """
    mod = _module(scale_source(MAX_MODULI, stats=True), f"{SCALE_KERNEL}_exp", arch)
    return tuple(mod.get_function(f"{SCALE_KERNEL}_{k}") for k in ("sq", "exp"))


class Stats(NamedTuple):
    """What the norms' pass also gives the elementwise guarantee: l1 (float64), top (uint32 bits).

    One of each a vector, contiguous: its 1-norm and its largest magnitude as a float's bits.
    """

    l1: cp.ndarray
    top: cp.ndarray

    @classmethod
    def empty(cls, v: int) -> Stats:
        """Return room for `v` vectors' stats."""
        return cls(cp.empty(v, cp.float64), cp.empty(v, cp.uint32))


def exponent_pass(
    sq, exp, sms: int, x: cp.ndarray, axis: int, norms: cp.ndarray | None = None, stats: Stats | None = None
) -> cp.ndarray:
    """Launch the scaling's sum-of-squares and exponent kernels (`sq`, `exp`) over `x`'s vectors.

    Args:
        sms: the device's multiprocessors (the chunks of K that fill it).
        norms: float64, one a vector, contiguous: the 2-norms are written there where given.
        stats: the vectors' 1-norms and largest magnitudes are written there where given.
    Returns:
        int32 e, one a vector (the exponents for the moduli `exp` was rendered for).
    """
    v, k, sv, sk = _vectors(x, axis)
    e = cp.empty(v, cp.int32)
    outs = [("norms", norms, cp.float64)]
    if stats is not None:
        outs += [("l1", stats.l1, cp.float64), ("top", stats.top, cp.uint32)]
    for name, out, dtype in outs:
        if out is not None and (out.dtype != dtype or out.shape != (v,) or not out.flags.c_contiguous):
            raise ValueError(f"{name} must be contiguous {dtype.__name__} of {v}, not {out.dtype} {out.shape}")
    if v == 0:
        return e
    chunk = exp_chunk(v, k, sk == 1, sms)
    grid = exp_grid(v, k, sk == 1, chunk)
    part = cp.empty((grid[1], v, 4), cp.float64)
    vec = np.int32(_float4_rows(x, sv))
    sq(grid, EXP_BLOCK, (np.int32(v), np.int32(k), x, np.int64(sv), np.int64(sk), np.int32(chunk), part, vec))
    null = np.uint64(0)  # a null pointer: not written
    outs = [norms if norms is not None else null, *(stats if stats is not None else (null, null))]
    exp((-(-v // 256), 1, 1), (256, 1, 1), (np.int32(v), np.int32(k), np.int32(grid[1]), part, e, *outs))
    return e


class OzakiGemm:
    """Ozaki scheme II with `n` moduli on the current device: the stages, and C from A and B.

    Args:
        n: the number of moduli (INT8 GEMMs).
        tile: the INT8 GEMM's tile, of the kernel's class (KERNELS); its default when None.
        arch: the target, e.g. "sm_90"; the current device's by default.
        kernel: "fast" (every modulus in one pipelined launch), "reference" (a launch each),
            "wgmma" (every modulus in one launch on Hopper's wgmma: built for sm_90a whatever `arch`)
            or "wgmma_tma" (the same fed by tensor maps); None is the fastest for `arch`
            (default_kernel).
    """

    def __init__(
        self,
        n: int,
        tile: FastTile | Int8Tile | WgmmaTile | WgmmaTmaTile | None = None,
        arch: str | None = None,
        kernel: str | None = None,
    ):
        arch = arch or f"sm_{cp.cuda.Device().compute_capability}"
        kernel = default_kernel(arch) if kernel is None else kernel
        if kernel not in KERNELS:
            raise ValueError(f"INT8 kernel {kernel!r}: one of {', '.join(KERNELS)}")
        tile = tile or KERNELS[kernel]()
        if type(tile) is not KERNELS[kernel]:  # (a WgmmaTmaTile is a WgmmaTile, for the other kernel)
            raise ValueError(f"the {kernel} kernel takes a {KERNELS[kernel].__name__}, not {tile}")
        self.n, self.tile, self.kernel, self.moduli = n, tile, kernel, moduli(n)
        scale = _module(scale_source(n), f"{SCALE_KERNEL}_resk", arch)
        self._sq, self._exp, self._resk, self._rest = (
            scale.get_function(f"{SCALE_KERNEL}_{k}") for k in ("sq", "exp", "resk", "rest")
        )
        self._sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        if kernel in ONE_LAUNCH:
            source, name = ONE_LAUNCH[kernel]
            self._int8 = int8_function(source(tile), name, WGMMA_ARCH if kernel != "fast" else arch, tile.smem_bytes)
            self._mods = cp.asarray(self.moduli, cp.int32)
        else:
            self._int8 = _module(int8_source(tile), INT8_KERNEL, arch).get_function(INT8_KERNEL)
        self._crt = _module(crt_source(n), CRT_KERNEL, arch).get_function(CRT_KERNEL)

    def _require_room(self, k: int) -> None:
        """Raise ValueError where `n` moduli leave no room for the rounding of K elements (fits)."""
        if not fits(self.n, k):
            raise ValueError(f"{self.n} moduli cannot hold the rounding of {k} elements: more moduli")

    def exponents(self, x: cp.ndarray, axis: int, norms: cp.ndarray | None = None) -> cp.ndarray:
        """Return int32 e for each of `x`'s vectors along `axis`: 2^e brings its 2-norm under 2^H.

        The first of `scale`'s two passes (a sum of squares a chunk of K, then the exponents).

        Args:
            norms: float64, one a vector, contiguous: their 2-norms written there where given.
        Raises:
            ValueError: `n` moduli leave no room for the rounding of K elements.
        """
        self._require_room(_vectors(x, axis)[1])
        return exponent_pass(self._sq, self._exp, self._sms, x, axis, norms)

    def exponents_of(self, norms: cp.ndarray, k: int) -> cp.ndarray:
        """Return int32 e for vectors of length `k` whose 2-norms (float64, contiguous) are given.

        The exponents `exponents` would give from the pass that wrote these norms, without it.
        """
        self._require_room(k)
        if norms.dtype != cp.float64 or norms.ndim != 1 or not norms.flags.c_contiguous:
            raise ValueError(f"norms must be contiguous float64, not {norms.dtype} {norms.shape}")
        v = int(norms.shape[0])
        e = cp.empty(v, cp.int32)
        if v:
            null = np.uint64(0)  # no partial sums: the kernel reads the norms (and writes no stats)
            args = (np.int32(v), np.int32(k), np.int32(0), null, e, norms, null, null)
            self._exp((-(-v // 256), 1, 1), (256, 1, 1), args)
        return e

    def scale(self, x: cp.ndarray, axis: int, e: cp.ndarray | None = None) -> Residues:
        """Return the residues of `x`'s vectors along `axis` (0: its rows, 1: its columns).

        op(A) (M x K) is scaled along axis 0, or A^T stored K x M along 1; op(B) (K x N) along 1.

        Args:
            e: the vectors' exponents (int32) where made already (exponents_of); else made here.
        """
        v, k, sv, sk = _vectors(x, axis)
        if e is None:
            e = self.exponents(x, axis)
        elif e.dtype != cp.int32 or e.shape != (v,) or not e.flags.c_contiguous:
            raise ValueError(f"e must be contiguous int32 of {v}, not {e.dtype} {e.shape}")
        else:
            self._require_room(k)
        pitch = residue_pitch(k)
        r = cp.empty((self.n, v, pitch), cp.int8)
        if v and pitch:  # K = 0 leaves no residues, and C = beta C
            head = (np.int32(v), np.int32(k), x, np.int64(sv))
            tail = (e, r, np.int32(pitch), np.int64(v * pitch))
            if sk == 1:
                vec = np.int32(_float4_rows(x, sv))
                self._resk(res_grid(v, k, True), RESK_BLOCK, (*head, *tail, vec))
            else:
                self._rest(res_grid(v, k, False), (256, 1, 1), (*head, np.int64(sk), *tail))
        return Residues(e, r, k)

    def products(self, ra: Residues, rb: Residues) -> cp.ndarray:
        """Return the INT8 GEMMs' (A'B') mod m_l, uint8 n x M x N with entries in [0, m_l)."""
        (_, m, _), nn = ra.r.shape, rb.r.shape[1]
        p = cp.empty((self.n, m, nn), cp.uint8)
        if m == 0 or nn == 0:
            return p
        t = self.tile
        if self.kernel == "wgmma_tma":
            tma_products(self._int8, t, ra.r, rb.r, ra.k, p, self._mods)
            return p
        if self.kernel in ONE_LAUNCH:
            args = (np.int32(m), np.int32(nn), np.int32(ra.k), ra.r, np.int32(ra.pitch), np.int64(ra.r.strides[0]))
            args += (rb.r, np.int32(rb.pitch), np.int64(rb.r.strides[0]), p, np.int32(nn), np.int64(m * nn))
            self._int8(t.grid(m, nn, self.n), (t.threads, 1, 1), (*args, self._mods), shared_mem=t.smem_bytes)
            return p
        for q, mod in enumerate(self.moduli):
            args = (np.int32(m), np.int32(nn), np.int32(ra.k), ra.r[q], np.int32(ra.pitch), rb.r[q])
            self._int8(
                self.tile.grid(m, nn),
                (self.tile.threads, 1, 1),
                (*args, np.int32(rb.pitch), p[q], np.int32(nn), np.int32(mod)),
            )
        return p

    def reconstruct(
        self, p: cp.ndarray, e: cp.ndarray, f: cp.ndarray, c: cp.ndarray, alpha=1.0, beta=0.0
    ) -> cp.ndarray:
        """Write alpha 2^-(e_i + f_j) CRT(p)_ij + beta C_ij into float32 `c` (M x N).

        Args:
            p: uint8 n x M x N residues, rows contiguous (as `products` returns).
            e, f: int32 exponents of op(A)'s rows and op(B)'s columns.
            c: rows contiguous; read where beta is not 0, written.
        """
        _, m, nn = p.shape
        if p.dtype != cp.uint8 or p.strides[2] != 1:
            raise ValueError(f"the products must be uint8 planes with contiguous rows, not {p.dtype} {p.strides}")
        if c.dtype != cp.float32 or c.shape != (m, nn) or c.strides[1] != 4 or c.strides[0] % 4:
            raise ValueError(f"C must be float32 {m} x {nn} with contiguous rows")
        if m and nn:
            args = (np.int32(m), np.int32(nn), p, np.int64(p.strides[0]), np.int32(p.strides[1]), e, f)
            ldc = c.strides[0] // 4
            vec = p.data.ptr % 4 == 0 and p.strides[0] % 4 == 0 and p.strides[1] % 4 == 0
            vec = vec and c.data.ptr % 16 == 0 and ldc % 4 == 0
            tail = (np.float64(alpha), np.float64(beta), c, np.int32(ldc), np.int32(vec))
            self._crt(crt_grid(m, nn), CRT_BLOCK, (*args, *tail))
        return c

    def __call__(
        self, a: cp.ndarray, b: cp.ndarray, alpha=1.0, beta=0.0, c=None, trans_a=False, trans_b=False
    ) -> cp.ndarray:
        """Return alpha op(A) op(B) + beta C in float32 (C updated in place when given).

        Args:
            a: A, float32, M x K (K x M with `trans_a`), any pitch.
            b: B, float32, K x N (N x K with `trans_b`).
            c: float32 M x N with contiguous rows; a new one when None (then beta must be 0).
        """
        ra = self.scale(a, 1 if trans_a else 0)
        rb = self.scale(b, 0 if trans_b else 1)
        if ra.k != rb.k:
            raise ValueError(f"op(A) has K = {ra.k}, op(B) {rb.k}")
        if c is None:
            if beta != 0:
                raise ValueError("beta != 0 needs C")
            c = cp.empty((ra.r.shape[1], rb.r.shape[1]), cp.float32)
        return self.reconstruct(self.products(ra, rb), ra.e, rb.e, c, alpha, beta)
