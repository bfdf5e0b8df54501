"""Softmax backward in one pass per row: dx = y * (dy - sum(dy * y))."""
import numba
import numpy as np

from . import by_size, serial_and_parallel


def _backward(dy, y):
    N, K = y.shape
    dx = np.empty_like(y)
    for n in numba.prange(N):
        s = 0.0
        for k in range(K):
            s += dy[n, k] * y[n, k]
        for k in range(K):
            dx[n, k] = y[n, k] * (dy[n, k] - s)
    return dx


_backward_s, _backward_p = serial_and_parallel(_backward)


def softmax_backward(dy, y):
    """dy, y (N, K) -> dx (N, K)."""
    return by_size(_backward_s, _backward_p, y.size)(dy, y)
