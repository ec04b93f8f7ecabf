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


def encode(ptr: int, inner: int, outer: int, pitch: int, box: tuple[int, int]) -> TensorMap:
    """Return the map of a row-major float32 matrix at `ptr`.

    The matrix is `outer` rows of `inner` floats, `pitch` floats apart (mappable), read in boxes of
    box[0] floats x box[1] rows with the 128-byte swizzle, each float rounded to TF32 by the copy
    (to nearest: its errors measured equal to cuBLAS TF32's).
    """
    tmap = TensorMap()
    dims = (ctypes.c_uint64 * 2)(inner, outer)
    strides = (ctypes.c_uint64 * 1)(4 * pitch)
    boxes = (ctypes.c_uint32 * 2)(*box)
    unit = (ctypes.c_uint32 * 2)(1, 1)
    err = _encode_tiled()(
        ctypes.addressof(tmap), _TFLOAT32, 2, ptr, dims, strides, boxes, unit,
        _INTERLEAVE_NONE, _SWIZZLE_128B, _L2_PROMOTION_128B, _OOB_FILL_ZEROS,
    )  # fmt: skip
    if err:
        raise ValueError(
            f"cuTensorMapEncodeTiled failed (CUresult {err}) for {outer} x {inner} floats, pitch {pitch}, box {box}"
        )
    return tmap


# Encodings of the operands seen lately: a program calls with the same few arrays again and again.
cached = BoundedCache(encode, maxsize=256)
