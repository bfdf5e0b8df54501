"""Softmax and log-softmax over the last axis, max-subtracted so exp never overflows.

softmax backward: dx = y * (dy - sum(dy * y)); log-softmax backward:
dx = dy - softmax(x) * sum(dy).
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..core.checks import check_float


def softmax_forward(x: np.ndarray):
    """x (..., K) -> y (..., K), rows summing to 1."""
    check_float("x", x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))             # (..., K)
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y


def softmax_backward_numpy(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """dy, y (N, K) -> dx (N, K)."""
    return y * (dy - (dy * y).sum(axis=1, keepdims=True))


def softmax_backward(dy: np.ndarray, cache) -> np.ndarray:
    y = cache
    K = y.shape[-1]
    fn = kernels.get("softmax_backward") or softmax_backward_numpy
    dx = fn(np.ascontiguousarray(dy, dtype=y.dtype).reshape(-1, K), np.ascontiguousarray(y).reshape(-1, K))
    return dx.reshape(y.shape)


def log_softmax_forward(x: np.ndarray):
    """x (..., K) -> log softmax(x) (..., K)."""
    check_float("x", x)
    z = x - x.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return logp, logp


def log_softmax_backward(dy: np.ndarray, cache) -> np.ndarray:
    logp = cache
    return dy - np.exp(logp) * dy.sum(axis=-1, keepdims=True)
