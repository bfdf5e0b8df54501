"""Exact GELU (Hendrycks & Gimpel 2016; the form BERT's Hugging Face code uses), forward
and backward in one pass each over a flat array; twins: ``gelu_forward_numpy`` /
``gelu_backward_numpy`` in ``minipt.ops.activations``.

    gelu(x) = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2,
    gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi).

NumPy has no vectorised erf, so the twin calls Python's ``math.erf`` once per element
(about 1 microsecond each: a BERT layer's FFN spent most of its step there). Numba
compiles ``math.erf`` to the C library's erf, evaluated in float64 and rounded to the
array's dtype, so float32 results are the correctly rounded twin's within 1 ulp.
"""
import math

import numba
import numpy as np

_RSQRT2 = 1.0 / math.sqrt(2.0)
_RSQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


@numba.njit(cache=True)
def gelu_forward(x):
    y = np.empty_like(x)                                  # (N,)
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        y[i] = v * 0.5 * (1.0 + math.erf(v * _RSQRT2))
    return y


@numba.njit(cache=True)
def gelu_backward(dy, x):
    dx = np.empty_like(x)                                 # (N,)
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        cdf = 0.5 * (1.0 + math.erf(v * _RSQRT2))
        dx[i] = dy[i] * (cdf + v * math.exp(-0.5 * v * v) * _RSQRT2PI)
    return dx
