"""Exact GELU (Hendrycks & Gimpel 2016), BERT's activation, forward and backward in one
pass each over a flat array; twins: ``gelu_forward_numpy`` / ``gelu_backward_numpy`` in
``minipt.ops.activations``.

    gelu(x) = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2,
    gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi).

NumPy has no erf, so the twin calls ``math.erf`` once per element through an object
array (about 0.1 us an element). Numba's ``math.erf`` is no faster per element (a call
into its helper library, which LLVM cannot vectorise: 16 ms forward + backward for 200k
float32 elements, against 0.2 ms for the tanh-approximation kernel of ``gelu.py``).

float32 therefore uses Abramowitz & Stegun 1964, formula 7.1.26, for the complementary
error function of z = |x| / sqrt 2 >= 0, in plain arithmetic that vectorises:

    erfc(z) ~= (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-z^2),  t = 1 / (1 + p z),

absolute error at most 1.5e-7 (p = 0.3275911; a1..a5 below), so Phi(x) = 1 - erfc(z) / 2
for x >= 0 and erfc(z) / 2 for x < 0 to within 7.5e-8, about float32's rounding. The
same exp(-z^2) = exp(-x^2 / 2) gives phi(x) for the backward, and exp is ``gelu._exp32``.
float64 (gradchecks) calls ``math.erf``, as the twin does, to agree with it within 1e-12.
Large arrays run in parts on threads, as ``gelu.py`` says.
"""
import math

import numba
import numpy as np

from . import threads
from .gelu import PART_MIN, _exp32

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"gelu.py": "abdd7eb1a7e88395"}

_R2 = 1.0 / math.sqrt(2.0)
_RPI = 1.0 / math.sqrt(2.0 * math.pi)
_R2F, _RPIF = np.float32(_R2), np.float32(_RPI)
_HF, _F1, _F0 = np.float32(0.5), np.float32(1.0), np.float32(0.0)
_P = np.float32(0.3275911)                               # Abramowitz & Stegun 7.1.26
_A1, _A2, _A3 = np.float32(0.254829592), np.float32(-0.284496736), np.float32(1.421413741)
_A4, _A5 = np.float32(-1.453152027), np.float32(1.061405429)


@numba.njit(cache=True, inline="always", fastmath={"contract"}, error_model="numpy")
def _phi32(v):
    """(Phi(v), exp(-v^2 / 2)) for a float32 v."""
    z = abs(v) * _R2F
    t = _F1 / (_F1 + _P * z)
    e = _exp32(-z * z)
    half_erfc = _HF * (t * (_A1 + t * (_A2 + t * (_A3 + t * (_A4 + t * _A5))))) * e
    return (_F1 - half_erfc if v >= _F0 else half_erfc), e


@numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def _forward32(x, y):
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = v * _phi32(v)[0]


@numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def _backward32(dy, x, dx):
    for i in range(x.shape[0]):
        v = x[i]
        cdf, e = _phi32(v)
        dx[i] = dy[i] * (cdf + v * e * _RPIF)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _forward64(x, y):
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = v * (0.5 * (1.0 + math.erf(v * _R2)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _backward64(dy, x, dx):
    for i in range(x.shape[0]):
        v = x[i]
        cdf = 0.5 * (1.0 + math.erf(v * _R2))
        dx[i] = dy[i] * (cdf + v * math.exp(-0.5 * v * v) * _RPI)


def gelu_forward(x: np.ndarray) -> np.ndarray:
    """x (N,) float32 or float64, C-contiguous -> y (N,) of the same dtype."""
    return threads.elementwise(_forward32 if x.dtype == np.float32 else _forward64, x, min_part=PART_MIN)


def gelu_backward(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,) of x's dtype."""
    return threads.elementwise(_backward32 if x.dtype == np.float32 else _backward64, dy, x, min_part=PART_MIN)
