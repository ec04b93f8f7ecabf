"""`autotune.matmul` on torch tensors under torch.compile: the call as the custom operators.

torch.compile traces a call rather than running it, and what it can put in a graph is the operator
(op.py), not autotune.matmul's launch. The package's root hands such calls here.
"""

from __future__ import annotations

import torch

from .op import matmul, matmul_out

# autotune.matmul runs on CUDA only (a CPU tensor is its TypeError in eager mode too); the
# operators themselves also serve the CPU, through torch.
DEVICES = ("cuda",)


def traced_matmul(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, precision="highest"):
    """Return what autotune.matmul returns, as a call of autotune::matmul or autotune::matmul_out.

    Args and Returns are autotune.matmul's; batch axes broadcast as there (a broadcast operand is
    expanded into the batch, which torch.compile may copy).
    """
    for x in (A, B) if out is None else (A, B, out):
        if x.device.type not in DEVICES:
            raise TypeError(f"autotune.matmul takes arrays on a CUDA device, got a tensor on {x.device}")
    if A.dim() < 2 or B.dim() < 2:
        raise ValueError(f"autotune.matmul takes (..., M, K) and (..., K, N) arrays, got {A.dim()}-D and {B.dim()}-D")
    lead = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    a, b = _batched(A, lead), _batched(B, lead)
    if out is None:
        if beta != 0:
            raise ValueError("beta != 0 needs an `out` to scale and add to")
        c = matmul(a, b, trans_a, trans_b, alpha, precision)
        return c if len(lead) == 1 else c.reshape(*lead, *c.shape[-2:])
    o = out.view(-1, *out.shape[-2:]) if len(lead) > 1 else out  # the batch folded in place, never copied
    matmul_out(a, b, o, trans_a, trans_b, alpha, beta, precision)
    return out


def _batched(x, lead: tuple) -> torch.Tensor:
    """x as a matrix (no batch) or a 3-D batch of prod(lead) matrices."""
    if not lead:
        return x
    x = x.expand(*lead, *x.shape[-2:])
    return x if len(lead) == 1 else x.reshape(-1, *x.shape[-2:])
