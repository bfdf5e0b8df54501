"""Affine map y = x W^T + b, the layer under every projection.

Weights are stored (out, in) as in PyTorch's ``nn.Linear`` and Hugging Face LLaMA,
so an output layer can reuse an embedding matrix (V, C) unchanged. The products are
NumPy's ``@``. On an AVX-512 CPU, a large float32 forward with a bias goes instead to the
register tiles of ``minipt.kernels.tiles``, which add b as they store y: the same bits.
Other float32 forwards and backwards go to ``minipt.kernels.linear``: the same calls to
the same BLAS as ``@`` makes, each pass in one call that lets go of Python's lock once.
The NumPy lines here are its twin.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..core.checks import check_last_dim, check_ndim, check_same_dtype, check_shape
from ..kernels import tiles


def linear_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None):
    """x (..., C_in), w (C_out, C_in), b (C_out,) or None -> y (..., C_out)."""
    check_same_dtype(x=x, weight=w, bias=b)
    check_ndim("weight", w, 2)
    check_last_dim("x", x, w.shape[1])
    if b is not None:
        check_shape("bias", b, (w.shape[0],))
    x2 = x.reshape(-1, x.shape[-1])               # (N, C_in): one GEMM, not one per batch row
    tab = tiles.table()
    if tiles.takes_linear(tab, x2, w, b):         # float32 on AVX-512: the same bits, b added in the tile
        y = tiles.linear(tab, x2, w, b)           # (N, C_out)
    else:                                         # float32: the same GEMM as below, and the bias, in one call
        fused = kernels.get("linear_forward")
        y = fused(x2, w, b) if fused else None
        if y is None:
            y = x2 @ w.T                          # (N, C_out)
            if b is not None:
                y += b
    return y.reshape(*x.shape[:-1], w.shape[0]), (x2, w, b is not None, x.shape)


def linear_backward(dy: np.ndarray, cache):
    """dy (..., C_out) -> dx (..., C_in), dw (C_out, C_in), db (C_out,) or None."""
    x2, w, has_bias, shape = cache
    dy2 = dy.reshape(-1, w.shape[0])              # (N, C_out)
    fused = kernels.get("linear_backward")
    grads = fused(dy2, w, x2, has_bias) if fused else None   # float32: the three products below in one call
    if grads is not None:
        return grads[0].reshape(shape), grads[1], grads[2]
    dx = (dy2 @ w).reshape(shape)                 # (..., C_in)
    dw = dy2.T @ x2                               # (C_out, C_in)
    # db as a GEMV, ones (N,) @ dy: 2-3x NumPy's sum over axis 0 at N 2048 (GPT L's B*T)
    db = np.ones(dy2.shape[0], dtype=dy2.dtype) @ dy2 if has_bias else None   # (C_out,)
    return dx, dw, db
