"""LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last axis.

LayerNorm: xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps), y = g * xhat + b.
Its input gradient (derived in lesson 00) is
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dy * g.
RMSNorm (T5, LLaMA) drops the mean and the bias: y = x * r * g, r = 1 / sqrt(mean(x^2) + eps),
    dx = r * (dxhat - xhat * mean(dxhat * xhat)),  xhat = x * r.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..core.checks import check_last_dim, check_ndim, check_same_dtype


def _rows(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.reshape(-1, x.shape[-1]))  # (N, C)


def layer_norm_forward_numpy(x, g, b, eps: float):
    """x (N, C), g (C,), b (C,) -> y (N, C), mean (N,), rstd (N,)."""
    mean = x.mean(axis=1)                                    # (N,)
    xc = x - mean[:, None]                                   # (N, C)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=1) + eps)       # (N,)
    y = xc * rstd[:, None] * g + b                           # (N, C)
    return y, mean, rstd


def layer_norm_backward_numpy(dy, x, mean, rstd, g):
    """dy, x (N, C), mean, rstd (N,), g (C,) -> dx (N, C), dg (C,), db (C,)."""
    xhat = (x - mean[:, None]) * rstd[:, None]               # (N, C)
    dxhat = dy * g                                           # (N, C)
    dx = rstd[:, None] * (dxhat - dxhat.mean(axis=1, keepdims=True)
                          - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def layer_norm_forward(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5):
    """x (..., C), g (C,), b (C,) -> y (..., C)."""
    check_same_dtype(x=x, gain=g, bias=b)
    check_ndim("gain", g, 1)
    check_last_dim("x", x, g.shape[0])
    check_last_dim("bias", b, g.shape[0])
    x2 = _rows(x)
    fwd = kernels.get("layer_norm_forward") or layer_norm_forward_numpy
    y, mean, rstd = fwd(x2, g, b, float(eps))
    return y.reshape(x.shape), (x2, mean, rstd, g, x.shape)


def layer_norm_backward(dy: np.ndarray, cache):
    """dy (..., C) -> dx (..., C), dg (C,), db (C,)."""
    x2, mean, rstd, g, shape = cache
    bwd = kernels.get("layer_norm_backward") or layer_norm_backward_numpy
    dx, dg, db = bwd(_rows(dy), x2, mean, rstd, g)
    return dx.reshape(shape), dg, db


def rms_norm_forward_numpy(x, g, eps: float):
    """x (N, C), g (C,) -> y (N, C), r (N,)."""
    r = 1.0 / np.sqrt((x * x).mean(axis=1) + eps)           # (N,)
    return x * r[:, None] * g, r


def rms_norm_backward_numpy(dy, x, r, g):
    """dy, x (N, C), r (N,), g (C,) -> dx (N, C), dg (C,)."""
    xhat = x * r[:, None]                                    # (N, C)
    dxhat = dy * g                                           # (N, C)
    dx = r[:, None] * (dxhat - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0)


def rms_norm_forward(x: np.ndarray, g: np.ndarray, eps: float = 1e-6):
    """x (..., C), g (C,) -> y (..., C)."""
    check_same_dtype(x=x, gain=g)
    check_ndim("gain", g, 1)
    check_last_dim("x", x, g.shape[0])
    x2 = _rows(x)
    fwd = kernels.get("rms_norm_forward") or rms_norm_forward_numpy
    y, r = fwd(x2, g, float(eps))
    return y.reshape(x.shape), (x2, r, g, x.shape)


def rms_norm_backward(dy: np.ndarray, cache):
    """dy (..., C) -> dx (..., C), dg (C,)."""
    x2, r, g, shape = cache
    bwd = kernels.get("rms_norm_backward") or rms_norm_backward_numpy
    dx, dg = bwd(_rows(dy), x2, r, g)
    return dx.reshape(shape), dg

