"""ELMo's scalar mix (Peters et al. 2018, Eq. 1): a task-learned weighting of the L + 1
layers of a biLM, softmax-normalised, times a scale gamma:

    ELMo_k = gamma * sum_j s_j h_{k,j},   s = softmax(w)                (w (L+1,), gamma (1,))

Backward: with a_j = sum over (B, T, C) of dy * h_j,
    dh_j = gamma s_j dy,   dgamma = sum_j s_j a_j,
    dw_j = gamma s_j (a_j - sum_i s_i a_i)          (softmax's Jacobian).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_float, check_same_dtype, check_shape


def scalar_mix_forward(layers: list[np.ndarray], w: np.ndarray, gamma: np.ndarray):
    """layers: L+1 arrays (..., C) of one shape, w (L+1,), gamma (1,) -> y (..., C)."""
    if not layers:
        raise ValueError("scalar mix: expected at least one layer, got none")
    check_same_dtype(w=w, gamma=gamma, **{f"layers[{j}]": h for j, h in enumerate(layers)})
    check_shape("w (one mixing weight per layer)", w, (len(layers),))
    check_shape("gamma", gamma, (1,))
    for j, h in enumerate(layers):
        check_float(f"layers[{j}]", h)
        check_shape(f"layers[{j}]", h, layers[0].shape)
    e = np.exp(w - w.max())
    s = e / e.sum()                                               # (L+1,) softmax
    y = sum(s[j] * h for j, h in enumerate(layers))               # (..., C)
    return gamma[0] * y, (layers, s, gamma[0], y)


def scalar_mix_backward(dy: np.ndarray, cache):
    """dy (..., C) -> (list of dh_j (..., C), dw (L+1,), dgamma (1,))."""
    layers, s, gamma, y = cache
    a = np.array([np.sum(dy * h) for h in layers], dtype=s.dtype)  # (L+1,)
    dlayers = [(gamma * s[j]) * dy for j in range(len(layers))]
    dgamma = np.array([np.sum(dy * y)], dtype=s.dtype)            # (1,) = sum_j s_j a_j
    dw = gamma * s * (a - np.dot(s, a))                           # (L+1,)
    return dlayers, dw, dgamma
