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


def gelu_tanh_forward(x: np.ndarray):
    check_float("x", x)
    flat = np.ascontiguousarray(x).reshape(-1)
    fn = kernels.get("gelu_tanh_forward") or gelu_tanh_forward_numpy
    return fn(flat).reshape(x.shape), flat


def gelu_tanh_backward(dy: np.ndarray, cache) -> np.ndarray:
    flat = cache
    fn = kernels.get("gelu_tanh_backward") or gelu_tanh_backward_numpy
    return fn(np.ascontiguousarray(dy, dtype=flat.dtype).reshape(-1), flat).reshape(dy.shape)


def gelu_forward_numpy(x: np.ndarray) -> np.ndarray:
    """Exact GELU x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2: x (N,) -> y (N,)."""
    cdf = (0.5 * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))).astype(x.dtype)
    return x * cdf


def gelu_backward_numpy(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,) = dy (Phi(x) + x phi(x))."""
    cdf = (0.5 * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))).astype(x.dtype)
    pdf = np.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return dy * (cdf + x * pdf)


def gelu_forward(x: np.ndarray):
    """Exact GELU (BERT): the Numba kernel ``kernels/gelu_erf.py`` or the NumPy twin."""
    check_float("x", x)
    flat = np.ascontiguousarray(x).reshape(-1)
    fn = kernels.get("gelu_forward") or gelu_forward_numpy
    return fn(flat).reshape(x.shape), flat


def gelu_backward(dy: np.ndarray, cache) -> np.ndarray:
    flat = cache
    fn = kernels.get("gelu_backward") or gelu_backward_numpy
    return fn(np.ascontiguousarray(dy, dtype=flat.dtype).reshape(-1), flat).reshape(dy.shape)


def relu_forward(x: np.ndarray):
    check_float("x", x)
    return np.maximum(x, 0), x > 0


def relu_backward(dy: np.ndarray, cache) -> np.ndarray:
    return dy * cache


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
