"""1-D convolution over time ("valid", stride 1), as in the character CNN of Kim et al.
2016 ("Character-Aware Neural Language Models") that ELMo (Peters et al. 2018) uses as its
token encoder.

    y[n, t, o] = b[o] + sum_{k < K, c < C_in} x[n, t + k, c] w[o, c, k],   t < L - K + 1

Weights are stored (C_out, C_in, K) as in PyTorch's ``nn.Conv1d``; the input is
channels-last (N, L, C_in), the layout of embedded characters. The forward is one GEMM
on the unfolded windows (im2col): cols[n, t] = x[n, t : t + K] flattened to K C_in.
Backward: dcols = dy W (one GEMM), folded back by adding each of the K shifted slices
into dx (col2im); dW = dy^T cols; db = sum of dy.
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_ndim, check_same_dtype, check_shape


def conv1d_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None):
    """x (N, L, C_in), w (C_out, C_in, K), b (C_out,) or None -> y (N, L - K + 1, C_out)."""
    check_same_dtype(x=x, weight=w, bias=b)
    check_ndim("x", x, 3)
    check_ndim("weight", w, 3)
    N, L, C = x.shape
    O, Cw, K = w.shape
    if Cw != C:
        raise ValueError(f"weight: expected {C} input channels (x has shape {x.shape}), got shape {w.shape}")
    if L < K:
        raise ValueError(f"x: sequence length {L} is shorter than the kernel width {K}")
    if b is not None:
        check_shape("bias", b, (O,))
    Lo = L - K + 1
    win = np.lib.stride_tricks.sliding_window_view(x, K, axis=1)     # (N, Lo, C, K) view
    cols = np.ascontiguousarray(win.transpose(0, 1, 3, 2)).reshape(N * Lo, K * C)  # (N Lo, K C)
    w2 = np.ascontiguousarray(w.transpose(2, 1, 0)).reshape(K * C, O)  # (C_out, C, K) -> (K C, C_out)
    y = cols @ w2                                                    # (N Lo, C_out)
    if b is not None:
        y += b
    return y.reshape(N, Lo, O), (cols, w2, x.shape, K, b is not None)


def conv1d_backward(dy: np.ndarray, cache):
    """dy (N, Lo, C_out) -> dx (N, L, C_in), dw (C_out, C_in, K), db (C_out,) or None."""
    cols, w2, (N, L, C), K, has_bias = cache
    Lo, O = L - K + 1, w2.shape[1]
    check_shape("dy", dy, (N, Lo, O))
    dy2 = dy.reshape(N * Lo, O)                                      # (N Lo, C_out)
    dcols = (dy2 @ w2.T).reshape(N, Lo, K, C)                        # (N, Lo, K, C)
    dx = np.zeros((N, L, C), dtype=cols.dtype)                       # (N, L, C)
    for k in range(K):
        dx[:, k:k + Lo] += dcols[:, :, k]                            # col2im: window offset k
    dw = (cols.T @ dy2).reshape(K, C, O).transpose(2, 1, 0)          # (K C, C_out) -> (C_out, C, K)
    db = dy2.sum(axis=0) if has_bias else None                       # (C_out,)
    return dx, np.ascontiguousarray(dw), db
