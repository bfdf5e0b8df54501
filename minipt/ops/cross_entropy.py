"""Cross-entropy over logits, fused with its softmax.

loss = mean over counted positions of -log softmax(z)_y, with ``ignore_index`` positions
left out of both sum and count. Label smoothing (Szegedy et al. 2016) replaces the
one-hot target by (1 - eps) onehot + eps / V. dlogits = (softmax(z) - target) / count.
When every target is ignored the loss is 0 and the gradient zero (nothing to learn;
a batch of padding must not become NaN).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_float
from .softmax import log_softmax_forward


def cross_entropy_forward(logits: np.ndarray, targets: np.ndarray, ignore_index: int = -100,
                          label_smoothing: float = 0.0):
    """logits (..., V), targets (...) int -> loss (0-d, logits dtype)."""
    check_float("logits", logits)
    if not isinstance(targets, np.ndarray) or not np.issubdtype(targets.dtype, np.integer):
        raise TypeError("targets: expected an integer array of class ids")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets: expected shape {logits.shape[:-1]} for logits {logits.shape}, "
                         f"got {targets.shape}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    V = logits.shape[-1]
    z = logits.reshape(-1, V)                                    # (N, V)
    t = targets.reshape(-1)                                      # (N,)
    keep = t != ignore_index                                     # (N,)
    bad = t[keep & ((t < 0) | (t >= V))]
    if bad.size:
        raise IndexError(f"target id {int(bad[0])} is outside [0, {V}) (ignore_index is {ignore_index})")
    count = int(keep.sum())
    logp, _ = log_softmax_forward(z)                             # (N, V)
    tk = np.where(keep, t, 0)
    nll = -logp[np.arange(len(t)), tk]                           # (N,)
    if label_smoothing:
        nll = (1.0 - label_smoothing) * nll - label_smoothing * logp.mean(axis=1)
    loss = np.asarray((nll * keep).sum() / max(count, 1), dtype=logits.dtype)
    return loss, (logp, tk, keep, count, label_smoothing, logits.shape)


def cross_entropy_backward(dloss, cache) -> np.ndarray:
    """dloss (scalar) -> dlogits (..., V)."""
    logp, tk, keep, count, eps, shape = cache
    V = shape[-1]
    dz = np.exp(logp)                                            # softmax (N, V)
    dz[np.arange(len(tk)), tk] -= (1.0 - eps)
    if eps:
        dz -= eps / V
    dz *= (keep * (float(dloss) / max(count, 1)))[:, None].astype(dz.dtype)
    return dz.reshape(shape)
