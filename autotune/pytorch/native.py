"""Products launched from C++ (native.cpp), eager or by the operator, where a plan was armed.

The Python road's cached launch (dispatch/shortcut.py) runs Python on every call. Once it has
served a key (shapes, strides, alignment, device, stream, transposes, tier), it arms a C++ plan of
the same launches (cuBLAS's: torch's mm): the next calls are a lookup, torch's empty output and
cuLaunchKernel. A plan lapses after the results table's recheck interval: the next call goes the
Python road once (new records, another results folder) and arms it again. The first CUDA product
builds the extension on a thread of its own (torch.utils.cpp_extension, about 25 s, into torch's
extensions folder; later processes load it). Until it is ready, where it cannot be built (no
compiler, no CUDA headers) and with $AUTOTUNE_NATIVE=0, the Python road serves; `status()` says.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import hashlib
import os
import sys
import threading
import warnings
from pathlib import Path

import torch

from ..core.types import UserError
from ..dispatch import api
from ..dispatch.table import RECHECK_S
from ..records.fields import shown
from . import route

ENV = "AUTOTUNE_NATIVE"
SOURCE = Path(__file__).with_name("native.cpp")
TIERS = {"highest": 0, "high": 1, "medium": 2}  # a plan's tier, in its key
TTL_NS = int(RECHECK_S * 1e9)
# Plans' own workspaces past these go, all at once (launches already queued keep theirs: the
# memory returns to CuPy's pool of the stream it was made on, in that stream's order).
MAX_RECIPES, MAX_WORKSPACE_BYTES = 1024, 1 << 30

product = None  # native.cpp's product once built: (a, b, trans_a, trans_b, tier, alpha) -> Tensor | None
_ext = None
_status = "not started"
_lock = threading.Lock()
_built = threading.Event()
_recipes: dict[tuple, tuple | None] = {}  # (kernel, M, N, K, pitches, stream) -> (steps, keep) or None
_workspace_bytes = 0
_capturing = torch.cuda.is_current_stream_capturing
_operator: tuple = ()  # hand_over's arguments
_serving = True  # plans serve the operator: not while a recording sees every product


def wanted() -> bool:
    """Return whether $AUTOTUNE_NATIVE leaves the C++ road on: "1", "" or unset yes; "0" no.

    Raises:
        UserError: any other value.
    """
    value = os.environ.get(ENV, "")
    if value in ("0", "1", ""):
        return value != "0"
    raise UserError(f"{ENV} must be 1 (the C++ road) or 0 (the Python road only), not {shown(value)}")


def start() -> None:
    """Build or load the extension on a thread of its own, once a process; return at once.

    Nothing where $AUTOTUNE_NATIVE=0 (see `wanted`).
    """
    global _status
    with _lock:
        if _status != "not started" or not wanted():
            return
        _status = "building"
    threading.Thread(target=_build, name="autotune-native", daemon=True).start()


def wait(timeout: float | None = None) -> str:
    """Start the build if asked for, wait for it (at most `timeout` s) and return `status()`."""
    start()
    if _status != "not started":
        _built.wait(timeout)
    return status()


def status() -> str:
    """Return "ready", "building", "not started" or "not built: <why>"."""
    return _status


def _build() -> None:
    global _ext, _status, product
    try:
        ext = _load()
        cuda = ctypes.CDLL("libcuda.so.1")
        ext.set_driver(
            *(ctypes.cast(f, ctypes.c_void_p).value for f in (cuda.cuLaunchKernel, cuda.cuStreamIsCapturing))
        )
        if _operator:  # with the tiers' names by number
            ext.serve_operator(*_operator, sorted(TIERS, key=TIERS.get))
    except Exception as exc:  # noqa: BLE001 - any failure leaves the Python road, which works
        _status = f"not built: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[-1]}"
        warnings.warn(
            f"autotune: the C++ road was {_status}; the Python road serves every call "
            f"({ENV}=0 skips the build and this warning)",
            RuntimeWarning,
            stacklevel=1,
        )
    else:
        with _lock:  # as serving()
            ext.set_serving(_serving)
            _ext, _status = ext, "ready"
        atexit.register(clear)  # plans hold Python objects: drop them while Python can
        api.on_shortcut_hit = arm
        product = ext.product
        route.forget()  # layers whose road was timed on the Python road alone: timed again
    finally:
        _built.set()


def _load():
    """Return the built extension module (built here unless torch's extensions folder has it)."""
    from torch.utils import cpp_extension

    source = SOURCE.read_bytes()
    name = "autotune_native_" + hashlib.sha256(source).hexdigest()[:12]
    lib = Path(torch.__file__).parent / "lib"
    return cpp_extension.load(
        name,
        [str(SOURCE)],
        extra_include_paths=_cuda_includes(),
        extra_ldflags=[f"-L{lib}", "-lc10_cuda"],
        with_cuda=False,  # host code only: no nvcc, the CUDA headers c10's stream needs
        verbose=False,
    )


def _cuda_includes() -> list[str]:
    """Return folders that hold cuda_runtime_api.h: the toolkit's, then those of NVIDIA's wheels."""
    from torch.utils.cpp_extension import CUDA_HOME

    homes = (CUDA_HOME, os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")
    found = [os.path.join(home, "include") for home in homes if home]
    for root in sys.path:
        headers = glob.glob(os.path.join(root, "nvidia", "*", "include", "cuda_runtime_api.h"))
        found += [os.path.dirname(h) for h in headers]
    return [d for d in dict.fromkeys(found) if os.path.isfile(os.path.join(d, "cuda_runtime_api.h"))]


def hand_over(product, autograd) -> None:
    """Have the extension serve autotune::matmul once built (op.py calls it at import).

    Args:
        product: impl.cuda_product, for the CUDA calls no plan serves.
        autograd: op.py's Autograd kernel (keyset, *args) for the rest; None keeps custom_op's.
    """
    global _operator
    _operator = (product, autograd)


def serving(on: bool) -> None:
    """Let plans serve the operator (on), or the Python road see each call (a recording)."""
    global _serving
    with _lock:
        _serving = on
        if _ext is not None:
            _ext.set_serving(on)


def arm(cut, A, B, trans_a: bool, trans_b: bool, precision: str) -> None:
    """Arm the plan of a call that the Python road's cached launch `cut` served.

    Only a new output of one 2-D product, by cuBLAS (torch's mm) or a kernel of ours (no tensor
    maps; not in a CUDA graph capture, as a plan's workspace is made when first armed).
    """
    tier = TIERS.get(precision)
    kernel = getattr(cut.launch, "__self__", None)
    if _ext is None or tier is None or cut.spans is not None or cut.batch != 1 or len(cut.shape) != 2:
        return
    if cut.bound is not None:  # cuBLAS's SGEMM (measure.CublasLaunch): torch's mm runs the same
        with contextlib.suppress(Exception):  # the Python road keeps serving what cannot be armed
            _ext.arm_torch(A, B, trans_a, trans_b, tier, cut.M, cut.N, kernel, TTL_NS)
        return
    if not hasattr(kernel, "recipe") or _capturing():
        return
    stream = cut.stream(A.device)
    key = (kernel, cut.M, cut.N, cut.K, cut.pitches, stream.ptr)
    # The Python road has served this call already: a plan that cannot be made (no memory for its
    # workspace, say) leaves that road serving the key, and must not fail the call.
    if key not in _recipes:
        try:
            recipe = kernel.recipe(cut.M, cut.N, cut.K, cut.pitches, stream)
        except Exception:  # noqa: BLE001
            recipe = None
        _remember(key, recipe)
    if (made := _recipes.get(key)) is not None:  # .get: another thread may have cleared them
        try:
            _ext.arm(A, B, trans_a, trans_b, tier, cut.M, cut.N, made[0], made[1], TTL_NS)
        except Exception:  # noqa: BLE001
            _recipes[key] = None


def _remember(key: tuple, recipe) -> None:
    global _workspace_bytes
    nbytes = 0 if recipe is None or recipe[1] is None else recipe[1].nbytes
    if len(_recipes) >= MAX_RECIPES or _workspace_bytes + nbytes > MAX_WORKSPACE_BYTES:
        clear()
    _workspace_bytes += nbytes
    _recipes[key] = None if recipe is None else (recipe[0], (key[0], recipe[1]))


def clear() -> None:
    """Drop every plan and its workspace, but one a CUDA graph launched with (kept)."""
    global _workspace_bytes
    if _ext is not None:
        _ext.clear()
    _recipes.clear()
    _workspace_bytes = 0
