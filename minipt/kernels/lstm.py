"""LSTM cell, the per-step pointwise work and its backward, fused (Hochreiter & Schmidhuber
1997; the forget-gate form of Gers et al. 2000). Twins: ``lstm_pointwise_forward_numpy`` /
``lstm_pointwise_backward_numpy`` in ``minipt.ops.lstm``.

One time step, for each row b with ``valid[b]`` (rows past their sequence's length keep
their state, written as zeros here; the op carries h and c over):

    i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_g), sigmoid(z_o)    z (B, 4H)
    c = f * c_prev + i * g;  tc = tanh(c);  hc = o * tc

and backward, with dhc the gradient reaching hc and dc_next the one reaching c from
the step after:

    dc = dc_next + dhc * o * (1 - tc^2)
    dz_i = dc g i (1 - i),  dz_f = dc c_prev f (1 - f),  dz_g = dc i (1 - g^2),
    dz_o = dhc tc o (1 - o),  dc_prev = dc f.

float32: sigmoid(z) = 1 / (1 + exp(-z)) and tanh(z) = 2 / (1 + exp(-2z)) - 1 with the
branch-free, vectorisable ``_exp32`` of ``kernels.gelu`` (Numba's scalar ``tanhf`` made
the cell 4x slower than the NumPy twin; the exp form is exact to float32 rounding in
absolute terms). float64 (gradchecks) uses np.tanh as the twin does. The loops are
serial: at B 32, H 256 a step is 8k cells, far below where threads pay off; the speed
comes from one pass instead of the twin's dozen temporaries.
"""
import numba
import numpy as np

from .gelu import _exp32

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"gelu.py": "abdd7eb1a7e88395"}

_ONE, _TWO = np.float32(1.0), np.float32(2.0)


@numba.njit(cache=True, inline="always")
def _sigmoid32(x):
    return _ONE / (_ONE + _exp32(-x))


@numba.njit(cache=True, inline="always")
def _tanh32(x):
    return _TWO / (_ONE + _exp32(-_TWO * x)) - _ONE


@numba.njit(cache=True, inline="always")
def _sigmoid64(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@numba.njit(cache=True, inline="always")
def _tanh64(x):
    return np.tanh(x)


def _make_forward(sigmoid, tanh):
    def forward(z, c_prev, valid, gates, c, tc, hc):
        B, H = c_prev.shape
        for b in range(B):
            if not valid[b]:
                for j in range(H):
                    c[b, j] = c_prev[b, j]
                    tc[b, j] = 0
                    hc[b, j] = 0
                for j in range(4 * H):
                    gates[b, j] = 0
                continue
            for j in range(H):
                i = sigmoid(z[b, j])
                f = sigmoid(z[b, H + j])
                g = tanh(z[b, 2 * H + j])
                o = sigmoid(z[b, 3 * H + j])
                cn = f * c_prev[b, j] + i * g
                t = tanh(cn)
                gates[b, j] = i
                gates[b, H + j] = f
                gates[b, 2 * H + j] = g
                gates[b, 3 * H + j] = o
                c[b, j] = cn
                tc[b, j] = t
                hc[b, j] = o * t
    return numba.njit(cache=True, fastmath={"contract"}, error_model="numpy")(forward)


_forward32 = _make_forward(_sigmoid32, _tanh32)
_forward64 = _make_forward(_sigmoid64, _tanh64)


def lstm_pointwise_forward(z, c_prev, valid, gates, c, tc, hc):
    """z (B, 4H) pre-activations, c_prev (B, H), valid (B,) bool; writes gates (B, 4H)
    activated [i f g o], c (B, H), tc = tanh(c) (B, H), hc = o tanh(c) (B, H)."""
    (_forward32 if z.dtype == np.float32 else _forward64)(z, c_prev, valid, gates, c, tc, hc)


@numba.njit(cache=True, fastmath={"contract"}, error_model="numpy")
def lstm_pointwise_backward(dhc, dc_next, gates, c_prev, tc, valid, dz, dc_prev):
    """dhc, dc_next (B, H), gates (B, 4H), c_prev, tc (B, H), valid (B,); writes dz (B, 4H)
    and dc_prev (B, H). Invalid rows pass dc_next straight to dc_prev, dz = 0."""
    B, H = c_prev.shape
    one = dz.dtype.type(1.0)
    zero = dz.dtype.type(0.0)
    for b in range(B):
        if not valid[b]:
            for j in range(H):
                dc_prev[b, j] = dc_next[b, j]
                dz[b, j] = zero
                dz[b, H + j] = zero
                dz[b, 2 * H + j] = zero
                dz[b, 3 * H + j] = zero
            continue
        for j in range(H):
            i = gates[b, j]
            f = gates[b, H + j]
            g = gates[b, 2 * H + j]
            o = gates[b, 3 * H + j]
            t = tc[b, j]
            dh = dhc[b, j]
            dc = dc_next[b, j] + dh * o * (one - t * t)
            dz[b, j] = dc * g * i * (one - i)
            dz[b, H + j] = dc * c_prev[b, j] * f * (one - f)
            dz[b, 2 * H + j] = dc * i * (one - g * g)
            dz[b, 3 * H + j] = dh * t * o * (one - o)
            dc_prev[b, j] = dc * f

