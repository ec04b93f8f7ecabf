"""Any CUDA array as a CuPy view over its memory, the stream to work on, an output of its kind.

Torch, Numba (`__cuda_array_interface__`) and DLPack arrays are viewed without a copy (`adopt`);
work goes on torch's current stream when an operand is a torch tensor, else on CuPy's
(`torch_stream`).
"""

from __future__ import annotations

import cupy as cp
import numpy as np

_F32 = np.dtype(np.float32)
_NDARRAY = cp.ndarray
_DLPACK_GPU = (2, 13)  # DLPack device types a kernel can read: kDLCUDA, kDLCUDAManaged
_GPU_KINDS = "a cupy.ndarray, a CUDA torch tensor, or an array with __cuda_array_interface__ or __dlpack__"
_STREAMS: dict[int, cp.cuda.Stream] = {}  # raw handle of a foreign stream -> CuPy's view of it
_STREAMS_MAX = 64


def adopt(name: str, x) -> cp.ndarray:
    """Return `x` as a CuPy array over the same memory; a TypeError says what is accepted."""
    # A CuPy array is used as it is, a PyTorch CUDA tensor viewed directly (what `cupy.asarray`
    # would make of it, faster), another object with `__cuda_array_interface__` (Numba, ...) goes
    # through `cupy.asarray`, one with only `__dlpack__` through `cupy.from_dlpack`: no copy.
    if isinstance(x, _NDARRAY):
        return x
    if _is_torch(x):
        _check_torch(name, x)
        return _torch_view(x)
    if hasattr(x, "__cuda_array_interface__"):
        return cp.asarray(x)  # waits for the stream the interface names, if any (its v3 rule)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        if x.__dlpack_device__()[0] in _DLPACK_GPU:
            return cp.from_dlpack(x)  # the producer orders its work before CuPy's current stream
        raise TypeError(f"{name} must be on the GPU ({_GPU_KINDS}); got {_kind(x)} in host memory")
    if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        raise TypeError(f"{name} must be on the GPU ({_GPU_KINDS}); got {_kind(x)} in host memory")
    raise TypeError(f"{name} must be {_GPU_KINDS}; got {_kind(x)}")


def new_output_like(A, shape: tuple[int, ...], beta: float):
    """Return a new output of A's kind: (what the call returns, its CuPy view, a wrapper or None).

    The wrapper, where there is one, is applied to the CuPy view after the launch.
    """
    # torch allocates it for a torch A (so it lives in torch's caching allocator), Numba wraps
    # CuPy's for a Numba A, anything else gets a cupy.ndarray.
    if beta != 0:
        raise ValueError("beta != 0 needs an `out` array holding C")
    if _is_torch(A):
        import torch

        t = torch.empty(shape, dtype=torch.float32, device=A.device)  # on torch's current stream
        return t, _torch_view(t), None
    c = cp.empty(shape, dtype=cp.float32)
    if type(A).__module__.startswith("numba"):
        from numba import cuda

        return None, c, cuda.as_cuda_array
    return c, c, None


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")  # torch is imported only when one is passed


def _check_torch(name: str, x) -> None:
    """Check that the tensor is float32, on a CUDA device, and needs no grad."""
    if x.device.type != "cuda":
        raise TypeError(f"{name} must be on the GPU ({_GPU_KINDS}); got a torch tensor on {x.device}")
    import torch

    if x.dtype != torch.float32:
        raise TypeError(f"{name} must be float32 (strict FP32 SGEMM), got {x.dtype}")
    if x.requires_grad:
        raise TypeError(f"{name} requires grad, and autotune records no autograd graph: pass {name}.detach()")


def _torch_view(x) -> cp.ndarray:
    """Return what cupy.asarray(x) makes of a float32 CUDA tensor, several microseconds sooner."""
    # The same view as through its __cuda_array_interface__ (version 2: no stream to wait for),
    # without building that dict in Python or asking the driver which device the pointer is on.
    shape, stride = tuple(x.shape), x.stride()
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if x.numel() else 0
    mem = cp.cuda.UnownedMemory(x.data_ptr(), 4 * extent, x, x.device.index)  # x kept alive
    return cp.ndarray(shape, _F32, cp.cuda.MemoryPointer(mem, 0), tuple(4 * s for s in stride))


def torch_stream(named) -> cp.cuda.Stream | None:
    """Return torch's current stream on the device of the first torch operand, None without one."""
    # Where torch queued the work that wrote the operands; arrays.prepare makes copies, workspaces
    # and new outputs on it too, so nothing runs out of order with the caller's own work.
    for name, x in named:
        if _is_torch(x):
            _check_torch(name, x)
            import torch

            return _foreign_stream(torch.cuda.current_stream(x.device).cuda_stream)
    return None


def torch_current_stream(device) -> cp.cuda.Stream:
    """Return CuPy's view of torch's current stream on `device` (a CUDA torch.device)."""
    import torch

    # The raw handle straight from torch's C side where it has one: a torch.cuda.Stream object
    # costs microseconds a call.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    handle = raw(device.index) if raw is not None else torch.cuda.current_stream(device).cuda_stream
    return _foreign_stream(handle)


def _foreign_stream(handle: int) -> cp.cuda.Stream:
    """Return CuPy's view of a raw stream handle, made once per handle (up to _STREAMS_MAX)."""
    stream = _STREAMS.get(handle)
    if stream is None:
        if len(_STREAMS) >= _STREAMS_MAX:
            del _STREAMS[next(iter(_STREAMS))]
        stream = _STREAMS[handle] = _wrap_stream(handle)
    return stream


class _Handle:
    """A raw stream handle in the CUDA stream protocol, for Stream.from_external."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _wrap_stream(handle: int) -> cp.cuda.Stream:
    """Return a CuPy stream over the raw handle."""
    if handle == 0:
        return cp.cuda.Stream.null  # the legacy default stream, torch's default
    if hasattr(cp.cuda.Stream, "from_external"):  # CuPy 14; ExternalStream is deprecated there
        return cp.cuda.Stream.from_external(_Handle(handle))
    return cp.cuda.ExternalStream(handle)


def _kind(x) -> str:
    """Return the name of `x`'s type, with its module unless it is a builtin."""
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
