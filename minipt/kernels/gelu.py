"""GELU, tanh approximation (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units";
the form GPT-2 uses), forward and backward in one pass each over a flat array; twins:
``gelu_tanh_forward_numpy`` / ``gelu_tanh_backward_numpy`` in ``minipt.ops.activations``.

    gelu(x) = 0.5 x (1 + tanh(u)),  u = k (x + a x^3),  k = sqrt(2/pi),  a = 0.044715.

Since 0.5 (1 + tanh(u)) = sigmoid(2u), with w = 2u and e = exp(-w), s = 1 / (1 + e):
    y  = x s
    dx = dy (s + x s (1 - s) w'),  s (1 - s) = e s^2,  w' = 2k (1 + 3 a x^2),
so each element costs one exp, and e s^2 keeps the tails exact where 1 - s would cancel.

float32: Numba here has no vector math library, so a call to ``np.exp`` in the loop runs
one element at a time. ``_exp32`` is written out instead, in plain arithmetic LLVM
vectorises: exp(z) = 2^n exp(r) with n = round(z / ln 2), r = z - n ln 2 in
[-ln2/2, ln2/2], exp(r) by a degree-6 polynomial (coefficients fitted for this file by
least-squares with Lawson reweighting toward minimax: relative error 3e-9, below float32
rounding) and 2^n built from its exponent bits. float64 (gradchecks) uses ``np.tanh``
as the twin does, to agree with it within 1e-12. ``error_model="numpy"`` drops Python's
division-by-zero check, which would otherwise keep the loop from vectorising.

In parts on threads (``threads.in_parts``) from 2 x PART_MIN elements: forward and
backward of 2048 x 768 float32 elements (GPT L's and BERT L's feed-forward width) took
0.71 and 0.75 ms on two threads against 1.13 and 1.23 on one; at 1024 x 256 two threads
lost (0.25 against 0.19 ms): handing a part to a thread costs tens of microseconds.
"""
import math

import numba
import numpy as np

from . import threads

PART_MIN = 1 << 19                                     # elements per part on a thread, at least
_K2 = 2.0 * math.sqrt(2.0 / math.pi)                     # w = _K2 (x + _A x^3)
_A = 0.044715

# float32 constants (np.float32 globals stay float32 inside the loop)
_F1, _K2F, _AF, _A3F = np.float32(1.0), np.float32(_K2), np.float32(_A), np.float32(3.0 * _A)
_LOG2E = np.float32(1.0 / math.log(2.0))
_LN2_HI = np.float32(0.693145751953125)                  # ln 2 = _LN2_HI + _LN2_LO; _HI has 15
_LN2_LO = np.float32(1.428606765330187e-06)              # significant bits: n * _LN2_HI is exact
_ZMIN, _ZMAX = np.float32(-87.0), np.float32(88.0)       # 2^n stays a normal float32
_C2, _C3 = np.float32(0.49999993451647684), np.float32(0.16666520688957176)
_C4, _C5 = np.float32(0.04166838737025512), np.float32(0.008368709928154099)
_C6 = np.float32(0.0013814613184946652)


@numba.njit(cache=True, inline="always")
def _exp32(z):
    """exp(z) for a float32 z, branch-free; z is clamped to [-87, 88] (no inf, no denormal)."""
    z = min(max(z, _ZMIN), _ZMAX)
    n = np.floor(z * _LOG2E + np.float32(0.5))
    r = (z - n * _LN2_HI) - n * _LN2_LO
    p = _F1 + r * (_F1 + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * _C6)))))
    two_n = np.int32((np.int32(n) + np.int32(127)) << np.int32(23)).view(np.float32)
    return p * two_n


@numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def _forward32(x, y):
    for i in range(x.shape[0]):
        v = x[i]
        e = _exp32(-_K2F * (v + _AF * v * v * v))
        y[i] = v / (_F1 + e)


@numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def _backward32(dy, x, dx):
    for i in range(x.shape[0]):
        v = x[i]
        e = _exp32(-_K2F * (v + _AF * v * v * v))
        s = _F1 / (_F1 + e)
        dx[i] = dy[i] * (s + v * (e * s * s) * _K2F * (_F1 + _A3F * v * v))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _forward64(x, y):
    k = 0.5 * _K2
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = 0.5 * v * (1.0 + np.tanh(k * (v + _A * v * v * v)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _backward64(dy, x, dx):
    k = 0.5 * _K2
    for i in range(x.shape[0]):
        v = x[i]
        t = np.tanh(k * (v + _A * v * v * v))
        dx[i] = dy[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * _A * v * v))


def gelu_tanh_forward(x: np.ndarray) -> np.ndarray:
    """x (N,) float32 or float64, C-contiguous -> y (N,) of the same dtype."""
    return threads.elementwise(_forward32 if x.dtype == np.float32 else _forward64, x, min_part=PART_MIN)


def gelu_tanh_backward(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,) of x's dtype."""
    return threads.elementwise(_backward32 if x.dtype == np.float32 else _backward64, dy, x, min_part=PART_MIN)
