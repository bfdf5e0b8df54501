"""Softmax backward in one pass per row: dx = y * (dy - sum(dy * y))."""
import numba
import numpy as np


@numba.njit(cache=True, parallel=True)
def softmax_backward(dy, y):
    """dy, y (N, K) -> dx (N, K)."""
    N, K = y.shape
    dx = np.empty_like(y)
    for n in numba.prange(N):
        s = 0.0
        for k in range(K):
            s += dy[n, k] * y[n, k]
        for k in range(K):
            dx[n, k] = y[n, k] * (dy[n, k] - s)
    return dx
