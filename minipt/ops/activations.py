"""Element-wise activations as forward/backward pairs.

GELU (Hendrycks & Gimpel 2016): exact x * Phi(x) (BERT) and the tanh approximation
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2, "gelu_new"); ReLU; tanh;
sigmoid; SwiGLU (Shazeer 2020, LLaMA): swiglu(a, b) = silu(a) * b with silu(a) = a sigmoid(a);
GEGLU (Shazeer 2020, T5 v1.1's "gated-gelu"): geglu(a, b) = gelu_tanh(a) * b.
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..core.checks import check_float, check_same_dtype

_K = math.sqrt(2.0 / math.pi)      # Python floats: no float64 upcast of float32 arrays
_A = 0.044715
_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_tanh_forward_numpy(x: np.ndarray) -> np.ndarray:
    """x (N,) -> y (N,)."""
    return 0.5 * x * (1.0 + np.tanh(_K * (x + _A * x * x * x)))


def gelu_tanh_backward_numpy(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,)."""
    t = np.tanh(_K * (x + _A * x * x * x))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _K * (1.0 + 3.0 * _A * x * x))


def _flat_forward(kernel: str, twin, x: np.ndarray):
    """An element-wise activation over x flattened: the Numba ``kernel`` or its NumPy
    ``twin``; the cache is the flat input."""
    check_float("x", x)
    flat = np.ascontiguousarray(x).reshape(-1)                                       # (N,)
    return (kernels.get(kernel) or twin)(flat).reshape(x.shape), flat


def _flat_backward(kernel: str, twin, dy: np.ndarray, flat: np.ndarray) -> np.ndarray:
    dy_flat = np.ascontiguousarray(dy, dtype=flat.dtype).reshape(-1)                 # (N,)
    return (kernels.get(kernel) or twin)(dy_flat, flat).reshape(dy.shape)


def gelu_tanh_forward(x: np.ndarray):
    return _flat_forward("gelu_tanh_forward", gelu_tanh_forward_numpy, x)


def gelu_tanh_backward(dy: np.ndarray, cache) -> np.ndarray:
    return _flat_backward("gelu_tanh_backward", gelu_tanh_backward_numpy, dy, cache)


def _phi_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2 in x's dtype (Python's erf, one element at a time)."""
    return (0.5 * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))).astype(x.dtype)


def gelu_forward_numpy(x: np.ndarray) -> np.ndarray:
    """Exact GELU x * Phi(x): x (N,) -> y (N,)."""
    return x * _phi_cdf(x)


def gelu_backward_numpy(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,) = dy (Phi(x) + x phi(x))."""
    pdf = np.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return dy * (_phi_cdf(x) + x * pdf)


def gelu_forward(x: np.ndarray):
    """Exact GELU (BERT): the Numba kernel ``kernels/gelu_erf.py`` or the NumPy twin."""
    return _flat_forward("gelu_forward", gelu_forward_numpy, x)


def gelu_backward(dy: np.ndarray, cache) -> np.ndarray:
    return _flat_backward("gelu_backward", gelu_backward_numpy, dy, cache)


def relu_forward_numpy(x: np.ndarray) -> np.ndarray:
    """x (N,) -> y (N,)."""
    return np.maximum(x, x.dtype.type(0.0))


def relu_backward_numpy(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,)."""
    return dy * (x > 0)


def relu_forward(x: np.ndarray):
    """ReLU: the Numba kernel ``kernels/relu.py`` or the NumPy twin."""
    return _flat_forward("relu_forward", relu_forward_numpy, x)


def relu_backward(dy: np.ndarray, cache) -> np.ndarray:
    return _flat_backward("relu_backward", relu_backward_numpy, dy, cache)


def tanh_forward(x: np.ndarray):
    check_float("x", x)
    y = np.tanh(x)
    return y, y


def tanh_backward(dy: np.ndarray, cache) -> np.ndarray:
    return dy * (1.0 - cache * cache)


def sigmoid_forward(x: np.ndarray):
    check_float("x", x)
    y = 0.5 * (1.0 + np.tanh(0.5 * x))         # stable for large |x|
    return y, y


def sigmoid_backward(dy: np.ndarray, cache) -> np.ndarray:
    return dy * cache * (1.0 - cache)


def swiglu_forward(a: np.ndarray, b: np.ndarray):
    """a (gate), b (up) (..., F) -> silu(a) * b (..., F)."""
    check_same_dtype(gate=a, up=b)
    if a.shape != b.shape:
        raise ValueError(f"swiglu: gate shape {a.shape} differs from up shape {b.shape}")
    s = 0.5 * (1.0 + np.tanh(0.5 * a))        # sigmoid(a)
    silu = a * s
    return silu * b, (a, b, s, silu)


def swiglu_backward(dy: np.ndarray, cache):
    """dy (..., F) -> da, db."""
    a, b, s, silu = cache
    da = dy * b * (s * (1.0 + a * (1.0 - s)))  # d silu / da = s + a s (1 - s)
    return da, dy * silu


def geglu_forward(a: np.ndarray, b: np.ndarray):
    """a (gate), b (up) (..., F) -> gelu_tanh(a) * b (..., F) (T5 v1.1's gated GELU)."""
    check_same_dtype(gate=a, up=b)
    if a.shape != b.shape:
        raise ValueError(f"geglu: gate shape {a.shape} differs from up shape {b.shape}")
    g, gcache = gelu_tanh_forward(a)                                   # (..., F)
    return g * b, (b, g, gcache)


def geglu_backward(dy: np.ndarray, cache):
    """dy (..., F) -> da, db."""
    b, g, gcache = cache
    return gelu_tanh_backward(dy * b, gcache), dy * g
