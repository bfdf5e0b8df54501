"""GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2), forward and backward in
one pass each over a flat array.

Uses 0.5 (1 + tanh(u)) = sigmoid(2u): y = x * sigmoid(w), w = 2 sqrt(2/pi) (x + 0.044715 x^3),
so each element costs one exp in the input's own precision (constants are cast to the
input dtype, so float32 stays float32 inside the loop).
"""
import math

import numba
import numpy as np

from . import by_size, serial_and_parallel

_K2 = 2.0 * math.sqrt(2.0 / math.pi)
_A = 0.044715


def _forward(x):
    y = np.empty_like(x)
    one, k2, a = x.dtype.type(1.0), x.dtype.type(_K2), x.dtype.type(_A)
    for i in numba.prange(x.shape[0]):
        v = x[i]
        y[i] = v / (one + np.exp(-k2 * (v + a * v * v * v)))
    return y


def _backward(dy, x):
    dx = np.empty_like(x)
    one, k2, a, a3 = x.dtype.type(1.0), x.dtype.type(_K2), x.dtype.type(_A), x.dtype.type(3.0 * _A)
    for i in numba.prange(x.shape[0]):
        v = x[i]
        s = one / (one + np.exp(-k2 * (v + a * v * v * v)))
        dx[i] = dy[i] * (s + v * s * (one - s) * k2 * (one + a3 * v * v))
    return dx


_forward_s, _forward_p = serial_and_parallel(_forward)
_backward_s, _backward_p = serial_and_parallel(_backward)


def gelu_tanh_forward(x):
    """x (N,) -> y (N,)."""
    return by_size(_forward_s, _forward_p, x.size)(x)


def gelu_tanh_backward(dy, x):
    """dy, x (N,) -> dx (N,):  d/dx [x s(w)] = s + x s (1 - s) w'(x)."""
    return by_size(_backward_s, _backward_p, x.size)(dy, x)
