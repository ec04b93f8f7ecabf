"""A compiled, verified kernel of one config on the current device (`Kernel`).

It is called as `autotune.matmul` is; the operands' module (`arrays`, which imports CuPy) is
loaded on first use.
"""

from __future__ import annotations

import functools

from ..core.tiers import DEFAULT
from ..core.types import Config, Problem
from ..kernels.family import cached_family

_VERIFY_SHAPE = (67, 45, 33)


class Kernel:
    """A compiled, verified SGEMM kernel on the current device: `kernel(A, B, out, alpha, beta)`.

    Args:
        config: The config to build (its family resolves it).
        arch: The device's architecture ('sm_90'), compiled for as the family allows.
        source: What chose the config ("fallback config", "tuned for ..."), shown in its repr.
    """

    def __init__(self, config: Config, arch: str, source: str = "default"):
        from ..gpu.compile import compile_source
        from ..gpu.launcher import LoadedKernel
        from ..kernels.render import DEFAULT_KERNEL, render

        resolved = cached_family(config.family).resolve(config)
        self.config, self.source, self.family = resolved.config, source, resolved.family
        self.layout = Problem.layout_of(resolved.plan.layout)
        self.precision = resolved.env.get("PRECISION", DEFAULT)  # the tier it was built for
        self.batched = resolved.plan.batched  # a batch in one launch (else one launch a matrix)
        compiled = compile_source(render(resolved), self.family.compile_arch(arch), DEFAULT_KERNEL)
        self.resources = compiled.resources
        self._kernel = LoadedKernel(compiled.cubin, DEFAULT_KERNEL, resolved.plan)

    def __repr__(self) -> str:
        return f"<autotune.Kernel {self.config.name} ({self.source})>"

    def __call__(
        self, A, B, out=None, alpha: float = 1.0, beta: float = 0.0, *, trans_a: bool = False, trans_b: bool = False
    ):
        """Return C = alpha * op(A) @ op(B) + beta * C, taking what `autotune.matmul` takes.

        The kernel reads one layout (`layout`): an operand stored the other way is copied first.
        A batch runs in one launch on a kernel built for batches (`batched`), one launch per
        matrix on another.
        """
        arrays = gpu_arrays()
        try:
            return self._launch(arrays.prepare(A, B, out, beta, trans_a, trans_b).as_layout(self.layout), alpha, beta)
        except RuntimeError:
            if not arrays.bind_context():  # as matmul: a thread without a context gets one, once
                raise
        return self(A, B, out, alpha, beta, trans_a=trans_a, trans_b=trans_b)

    def _launch(self, ops, alpha: float, beta: float):
        self._kernel.launch(
            ops.M, ops.N, ops.K, ops.a, ops.b, ops.c, alpha, beta, ops.stream, ops.pitches, ops.batch, ops.strides
        )
        return ops.finish()

    def verify(self, tolerance: float | None = None) -> float:
        """Return the relative error on a small awkward problem; RuntimeError above `tolerance`."""
        # Checked against a float64 product; `tolerance` is by default the tier's (1e-4, or 2e-3
        # for a one-TF32-product kernel).
        if tolerance is None:
            from ..core.tiers import tier

            tolerance = tier(self.precision).tolerance
        import cupy as cp

        M, N, K = _VERIFY_SHAPE
        a, b, c0, ref = _verify_problem(cp.cuda.Device().id)
        out = c0.copy()
        self(a, b, out, 1.5, -0.5)
        err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
        if not err <= tolerance:
            raise RuntimeError(f"{self.config.name}: relative error {err:.3g} on {M}x{N}x{K}; not using it")
        return err


@functools.cache
def _verify_problem(dev: int):
    """Return (A, B, C0, 1.5 A B - 0.5 C0 in float64) of the load-time check on device `dev`."""
    # Made once per device: a kernel's first load costs its check, not a new generator and reference.
    import cupy as cp

    M, N, K = _VERIFY_SHAPE
    rng = cp.random.default_rng(1)
    a = rng.random((M, K), dtype=cp.float32) * 2 - 1
    b = rng.random((K, N), dtype=cp.float32) * 2 - 1
    c0 = rng.random((M, N), dtype=cp.float32) * 2 - 1
    ref = 1.5 * (a.astype(cp.float64) @ b.astype(cp.float64)) - 0.5 * c0.astype(cp.float64)
    cp.cuda.get_current_stream().synchronize()  # read from any stream after this
    return a, b, c0, ref


_ARRAYS = None  # autotune.dispatch.arrays, once imported


def gpu_arrays():
    """Return the operands' module (`arrays`), imported on first use."""
    # Not at module level: `import autotune` needs no CuPy.
    global _ARRAYS
    if _ARRAYS is None:
        from ..gpu.compile import nvrtc_version

        nvrtc_version()  # without the CUDA extra: one error naming it, before CuPy is imported
        from . import arrays

        _ARRAYS = arrays
    return _ARRAYS
