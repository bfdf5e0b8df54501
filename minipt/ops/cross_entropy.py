"""Cross-entropy over logits, fused with its softmax.

loss = mean over counted positions of -log softmax(z)_y, with ``ignore_index`` positions
left out of both sum and count. Label smoothing (Szegedy et al. 2016) replaces the
one-hot target by (1 - eps) onehot + eps / V. dlogits = (softmax(z) - target) / count.
When every target is ignored the loss is 0 and the gradient zero (nothing to learn;
a batch of padding must not become NaN). float32 rows run in the Numba kernel
``kernels/cross_entropy.py`` (in one part its forward also makes the gradient for
dloss = 1, which the backward then hands over); float64 (gradient checks) and runs without Numba in its NumPy
twin (``_rows_numpy``, ``_rows_backward_numpy``). The kernel's float64 agrees with the twin
to 1e-15 (tests/kernels), but its reassociated sums round differently, and in lesson 12's
whole-model check that moved the central-difference round-off on one tiny gradient
entry (3.7e-7; analytic gradients equal to 16 digits) from 4.3e-7 to 1.2e-6 relative.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..core.checks import check_float
from .softmax import log_softmax_forward


def cross_entropy_forward(logits: np.ndarray, targets: np.ndarray, ignore_index: int = -100,
                          label_smoothing: float = 0.0):
    """logits (..., V), targets (...) int -> loss (0-d, logits dtype)."""
    check_float("logits", logits)
    if not isinstance(targets, np.ndarray) or targets.dtype.kind not in "iu":    # signed or unsigned integers
        raise TypeError("targets: expected an integer array of class ids")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets: expected shape {logits.shape[:-1]} for logits {logits.shape}, "
                         f"got {targets.shape}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    V = logits.shape[-1]
    z = logits.reshape(-1, V)                                    # (N, V)
    t = targets.reshape(-1)                                      # (N,)
    fused = kernels.get("cross_entropy") if logits.dtype == np.float32 else None
    if fused:                                                    # targets and rows: float32 in Numba
        z = np.ascontiguousarray(z)
        nll, state, tk, keep, count, bad, dz1 = fused(z, t, ignore_index, float(label_smoothing))   # lse (N,)
    else:
        tk, keep, count, bad = (kernels.get("cross_entropy_targets") or _targets_numpy)(t, ignore_index, V)
        dz1 = None
    if bad >= 0:
        raise IndexError(f"target id {int(t[bad])} is outside [0, {V}) (ignore_index is {ignore_index})")
    if not fused:
        nll, state = _rows_numpy(z, tk, label_smoothing)         # (N,), logp (N, V)
        nll = nll * keep
    loss = np.asarray(nll.sum() / max(count, 1), dtype=logits.dtype)
    return loss, (z, state, tk, keep, count, label_smoothing, logits.shape, fused is not None, dz1)


def _targets_numpy(t, ignore_index: int, V: int):
    """The twin of the kernel's target pass: t (N,) -> tk (N,) (ignored rows read class 0),
    keep (N,) bool, count kept, index of the first kept target outside [0, V) or -1."""
    keep = t != ignore_index                                     # (N,)
    bad = np.flatnonzero(keep & ((t < 0) | (t >= V)))
    return np.where(keep, t, 0), keep, int(keep.sum()), int(bad[0]) if bad.size else -1


def _rows_numpy(z, tk, eps):
    """The twin of the kernel's rows: z (N, V), tk (N,) -> nll (N,), logp (N, V)."""
    logp, _ = log_softmax_forward(z)                             # (N, V)
    nll = -logp[np.arange(len(tk)), tk]                          # (N,)
    if eps:
        nll = (1.0 - eps) * nll - eps * logp.mean(axis=1)
    return nll, logp


def _rows_backward_numpy(logp, tk, w, eps):
    """logp (N, V), tk (N,), w (N,) -> dz (N, V)."""
    V = logp.shape[1]
    dz = np.exp(logp)                                            # softmax (N, V)
    dz[np.arange(len(tk)), tk] -= (1.0 - eps)
    if eps:
        dz -= eps / V
    dz *= w[:, None].astype(dz.dtype)
    return dz


def cross_entropy_backward(dloss, cache) -> np.ndarray:
    """dloss (scalar) -> dlogits (..., V)."""
    z, state, tk, keep, count, eps, shape, fused, dz1 = cache
    if dz1 is not None and float(dloss) == 1.0:                  # made by the forward's kernel
        return dz1.reshape(shape)
    w = keep * (float(dloss) / max(count, 1))                    # (N,) float64
    if fused:
        dz = kernels.get("cross_entropy_rows_backward")(z, tk, state, w, float(eps))
    else:
        dz = _rows_backward_numpy(state, tk, w, eps)
    return dz.reshape(shape)
