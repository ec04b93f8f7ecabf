"""Tensor maps for kernels that copy tiles with the tensor memory accelerator.

They are CUtensorMap descriptors (kernels/launch.py, above `_steps`) encoded by the driver's
cuTensorMapEncodeTiled, which CuPy does not wrap, so it is called through ctypes. Host work only
(no context is touched), but it needs the driver library: without one `encode` raises OSError.
"""

from __future__ import annotations

import ctypes
import functools

from ..kernels.launch import TENSOR_MAP_BYTES, BoundedCache

# cuda.h's enumerators
_TFLOAT32 = 11  # CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: the copy rounds each float to TF32 (nearest)
# CU_TENSOR_MAP_DATA_TYPE_UINT8: cuda.h has no INT8; a byte is copied as it is, and the zero fill
# is the byte 0, int8's 0 too.
_UINT8 = 0
_INTERLEAVE_NONE = 0
_SWIZZLE_128B = 3
_L2_PROMOTION_128B = 2
_OOB_FILL_ZEROS = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros past the matrix

TensorMap = ctypes.c_uint64 * (TENSOR_MAP_BYTES // 8)
ZEROS = TensorMap()  # what a kernel gets where its operands allow no map (it must not use it)


def mappable(ptr: int, pitch: int) -> bool:
    """Whether a map can describe this operand: 16-byte aligned start and rows (pitch in floats)."""
    return ptr % 16 == 0 and pitch % 4 == 0


@functools.cache
def _encode_tiled():
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p]
    fn.argtypes += [ctypes.c_int] * 4
    fn.restype = ctypes.c_int
    return fn


def _encode(dtype: int, ptr: int, dims, strides, box, what: str) -> TensorMap:
    """Return the map of `dims` (innermost first) at `ptr`, `strides` bytes (all but the first)."""
    rank = len(dims)
    tmap = TensorMap()
    dims_c = (ctypes.c_uint64 * rank)(*dims)
    strides_c = (ctypes.c_uint64 * (rank - 1))(*strides)
    boxes = (ctypes.c_uint32 * rank)(*box)
    unit = (ctypes.c_uint32 * rank)(*([1] * rank))
    err = _encode_tiled()(
        ctypes.addressof(tmap), dtype, rank, ptr, dims_c, strides_c, boxes, unit,
        _INTERLEAVE_NONE, _SWIZZLE_128B, _L2_PROMOTION_128B, _OOB_FILL_ZEROS,
    )  # fmt: skip
    if err:
        raise ValueError(f"cuTensorMapEncodeTiled failed (CUresult {err}) for {what}, box {box}")
    return tmap


def encode(ptr: int, inner: int, outer: int, pitch: int, box: tuple[int, int]) -> TensorMap:
    """Return the map of a row-major float32 matrix at `ptr`.

    The matrix is `outer` rows of `inner` floats, `pitch` floats apart (mappable), read in boxes of
    box[0] floats x box[1] rows with the 128-byte swizzle, each float rounded to TF32 by the copy
    (to nearest: its errors measured equal to cuBLAS TF32's).
    """
    what = f"{outer} x {inner} floats, pitch {pitch}"
    return _encode(_TFLOAT32, ptr, (inner, outer), (4 * pitch,), box, what)


def planes_mappable(ptr: int, pitch: int) -> bool:
    """Whether a map can describe int8 planes: 16-byte aligned start and rows (pitch in bytes)."""
    return ptr % 16 == 0 and pitch % 16 == 0 and pitch > 0


def encode_planes(ptr: int, k: int, rows: int, pitch: int, planes: int, box: tuple[int, int]) -> TensorMap:
    """Return the map of int8 planes at `ptr`: `planes` x `rows` x `k` bytes, as Ozaki's residues.

    Rows are `pitch` bytes apart (at least k; planes_mappable), planes rows x pitch. Read in boxes
    of box[0] bytes of k x box[1] rows x one plane with the 128-byte swizzle, zeros past k, the
    rows and the planes (the bytes between k and the pitch are never read).
    """
    what = f"{planes} x {rows} x {k} int8, pitch {pitch}"
    return _encode(_UINT8, ptr, (k, rows, planes), (pitch, rows * pitch), (*box, 1), what)


# Encodings of the operands seen lately: a program calls with the same few arrays again and again.
cached = BoundedCache(encode, maxsize=256)
cached_planes = BoundedCache(encode_planes, maxsize=256)
