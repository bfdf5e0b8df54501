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

sigmoid(z) = (1 + tanh(z / 2)) / 2: one tanh, no overflow for large |z|. The loops are
serial: at B 32, H 256 a step is 8k cells, far below where threads pay off
(``kernels.PARALLEL_MIN``); the speed comes from one pass instead of the twin's dozen
temporaries.
"""
import numba
import numpy as np


@numba.njit(cache=True, fastmath={"contract"}, error_model="numpy")
def lstm_pointwise_forward(z, c_prev, valid, gates, c, tc, hc):
    """z (B, 4H) pre-activations, c_prev (B, H), valid (B,) bool; writes gates (B, 4H)
    activated [i f g o], c (B, H), tc = tanh(c) (B, H), hc = o tanh(c) (B, H)."""
    B, H = c_prev.shape
    half = z.dtype.type(0.5)
    one = z.dtype.type(1.0)
    zero = z.dtype.type(0.0)
    for b in range(B):
        if not valid[b]:
            for j in range(H):
                c[b, j] = c_prev[b, j]
                tc[b, j] = zero
                hc[b, j] = zero
                gates[b, j] = zero
                gates[b, H + j] = zero
                gates[b, 2 * H + j] = zero
                gates[b, 3 * H + j] = zero
            continue
        for j in range(H):
            i = half * (one + np.tanh(half * z[b, j]))
            f = half * (one + np.tanh(half * z[b, H + j]))
            g = np.tanh(z[b, 2 * H + j])
            o = half * (one + np.tanh(half * z[b, 3 * H + j]))
            cn = f * c_prev[b, j] + i * g
            t = np.tanh(cn)
            gates[b, j] = i
            gates[b, H + j] = f
            gates[b, 2 * H + j] = g
            gates[b, 3 * H + j] = o
            c[b, j] = cn
            tc[b, j] = t
            hc[b, j] = o * t


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

