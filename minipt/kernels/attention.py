"""Fused softmax stages of scaled dot-product attention (Vaswani et al. 2017).

The two matmuls (QK^T and PV) stay in BLAS; what lies between them is one Numba pass per
score row: scale, causal mask, max-subtracted softmax (forward), and the softmax backward
times the scale (backward). The causal case touches only keys j <= i + S - T, so the
masked half costs nothing; its entries are written as exact zeros. The NumPy op
(``minipt.ops.attention``, masked ``np.where`` + ``exp``) is the twin.
"""
import numba
import numpy as np

from . import by_size, serial_and_parallel


def _forward(s, scale, causal):
    B, H, T, S = s.shape
    sc = s.dtype.type(scale)
    zero = s.dtype.type(0.0)
    for r in numba.prange(B * H * T):
        b, h, i = r // (H * T), (r // T) % H, r % T
        row = s[b, h, i]
        last = i + S - T if causal else S - 1
        m = row[0] * sc
        for j in range(last + 1):
            row[j] *= sc
            if row[j] > m:
                m = row[j]
        total = zero
        for j in range(last + 1):
            e = np.exp(row[j] - m)
            row[j] = e
            total += e
        inv = s.dtype.type(1.0) / total
        for j in range(last + 1):
            row[j] *= inv
        for j in range(last + 1, S):
            row[j] = zero
    return s


def _backward(dp, p, scale, causal):
    B, H, T, S = p.shape
    sc = p.dtype.type(scale)
    zero = p.dtype.type(0.0)
    for r in numba.prange(B * H * T):
        b, h, i = r // (H * T), (r // T) % H, r % T
        g, y = dp[b, h, i], p[b, h, i]
        last = i + S - T if causal else S - 1
        dot = zero
        for j in range(last + 1):
            dot += g[j] * y[j]
        for j in range(last + 1):
            g[j] = y[j] * (g[j] - dot) * sc
        for j in range(last + 1, S):
            g[j] = zero
    return dp


_forward_s, _forward_p = serial_and_parallel(_forward, error_model="numpy")
_backward_s, _backward_p = serial_and_parallel(_backward, error_model="numpy")


def attention_softmax(s, scale, causal):
    """s (B,H,T,S) raw scores QK^T, overwritten in place with P = softmax(scale * s)."""
    return by_size(_forward_s, _forward_p, s.size)(s, scale, causal)


def attention_softmax_backward(dp, p, scale, causal):
    """dp (B,H,T,S) = dO V^T, overwritten in place with dS = scale * P (dP - sum(dP P))."""
    return by_size(_backward_s, _backward_p, p.size)(dp, p, scale, causal)
