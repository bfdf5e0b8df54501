"""Long short-term memory with hand-written backpropagation through time.

Hochreiter & Schmidhuber 1997, "Long Short-Term Memory"; the forget gate of Gers,
Schmidhuber & Cummins 2000; the projected LSTM (LSTMP) of Sak, Senior & Beaufays 2014,
which ELMo (Peters et al. 2018) uses between its layers. Gate order i, f, g, o as in
PyTorch, so weights carry over. For each step t and row b:

    z_t = x_t W_ih^T + b + h_{t-1} W_hh^T                       (B, 4H)
    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o);  g = tanh(z_g)
    c_t = f * c_{t-1} + i * g                                    (B, H)
    h_t = o * tanh(c_t)                   [LSTMP: h_t = (o * tanh(c_t)) W_proj^T, (B, P)]

The input projection x W_ih^T + b of all T steps is one GEMM (T B, C) x (C, 4H) before
the loop; inside the loop remain the recurrent GEMM (B, P) x (P, 4H) and the pointwise
cell, a Numba kernel (``minipt.kernels.lstm``) or its NumPy twin below.

BPTT (Werbos 1990) runs the loop backwards: dh_t = dy_t + dh from step t+1, through the
cell (kernel docstring) to dz_t, then dh_{t-1} = dz_t W_hh and dc_{t-1} = dc_t f. The
weight gradients are sums over steps, so they are taken after the loop as three GEMMs
over all T B rows: dW_ih = dZ^T X, dW_hh = dZ^T H_prev, dx = dZ W_ih.

Padding: ``lengths[b]`` is the number of real steps of row b (right padding). Past it a
row's h and c are carried unchanged and its output is 0, so ``h_n, c_n`` are the states
after each row's last real step, and a padded batch gives the same numbers as each row
run alone. Initial states ``h0, c0`` in and final states out let a long stream be read in
chunks with the state handed on (truncated BPTT, Williams & Peng 1990): gradients of
``h_n, c_n`` may flow in, gradients of ``h0, c0`` come out.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import kernels
from ..core.checks import check_float, check_ndim, check_same_dtype, check_shape


def lstm_pointwise_forward_numpy(z, c_prev, valid, gates, c, tc, hc) -> None:
    """Twin of ``kernels.lstm.lstm_pointwise_forward`` (same arguments, writes the outputs)."""
    H = c_prev.shape[1]
    act = np.empty_like(z)                                       # (B, 4H)
    act[:, :2 * H] = 0.5 * (1.0 + np.tanh(0.5 * z[:, :2 * H]))   # i, f
    act[:, 2 * H:3 * H] = np.tanh(z[:, 2 * H:3 * H])             # g
    act[:, 3 * H:] = 0.5 * (1.0 + np.tanh(0.5 * z[:, 3 * H:]))   # o
    i, f, g, o = act[:, :H], act[:, H:2 * H], act[:, 2 * H:3 * H], act[:, 3 * H:]
    cn = f * c_prev + i * g                                      # (B, H)
    t = np.tanh(cn)                                              # (B, H)
    v = valid[:, None]
    gates[...] = np.where(v, act, 0)
    c[...] = np.where(v, cn, c_prev)
    tc[...] = np.where(v, t, 0)
    hc[...] = np.where(v, o * t, 0)


def lstm_pointwise_backward_numpy(dhc, dc_next, gates, c_prev, tc, valid, dz, dc_prev) -> None:
    """Twin of ``kernels.lstm.lstm_pointwise_backward``."""
    H = c_prev.shape[1]
    i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
    dc = dc_next + dhc * o * (1.0 - tc * tc)                     # (B, H)
    v = valid[:, None]
    dz[:, :H] = np.where(v, dc * g * i * (1.0 - i), 0)
    dz[:, H:2 * H] = np.where(v, dc * c_prev * f * (1.0 - f), 0)
    dz[:, 2 * H:3 * H] = np.where(v, dc * i * (1.0 - g * g), 0)
    dz[:, 3 * H:] = np.where(v, dhc * tc * o * (1.0 - o), 0)
    dc_prev[...] = np.where(v, dc * f, dc_next)


class LSTMCache(NamedTuple):
    xt: np.ndarray          # (T, B, C) inputs, time-major
    w_ih: np.ndarray        # (4H, C)
    w_hh: np.ndarray        # (4H, P)
    w_proj: np.ndarray | None   # (P, H)
    h: np.ndarray           # (T+1, B, P) h_0 .. h_T
    c: np.ndarray           # (T+1, B, H) c_0 .. c_T
    gates: np.ndarray       # (T, B, 4H) activated i f g o
    tc: np.ndarray          # (T, B, H) tanh(c_t)
    hc: np.ndarray          # (T, B, H) o tanh(c_t), before the projection
    valid: np.ndarray       # (T, B) bool
    padded: bool


def check_lengths(lengths, B: int, T: int) -> np.ndarray:
    """lengths (B,) integers in [1, T] -> int64 array; None means every row has T steps."""
    if lengths is None:
        return np.full(B, T, dtype=np.int64)
    if not isinstance(lengths, np.ndarray) or not np.issubdtype(lengths.dtype, np.integer):
        got = lengths.dtype if isinstance(lengths, np.ndarray) else type(lengths).__name__
        raise TypeError(f"lengths: expected an integer array of sequence lengths, got {got}")
    check_shape("lengths", lengths, (B,))
    if lengths.min() < 1 or lengths.max() > T:
        bad = int(lengths.min()) if lengths.min() < 1 else int(lengths.max())
        raise ValueError(f"lengths: every length must be in [1, T={T}], got {bad}")
    return lengths.astype(np.int64)


def lstm_forward(x, w_ih, w_hh, b, h0=None, c0=None, lengths=None, w_proj=None):
    """x (B, T, C), w_ih (4H, C), w_hh (4H, P), b (4H,), h0 (B, P), c0 (B, H) or None
    (zeros), lengths (B,) int or None, w_proj (P, H) or None (then P = H)
    -> (y (B, T, P), h_n (B, P), c_n (B, H)), cache."""
    dtype = check_same_dtype(x=x, w_ih=w_ih, w_hh=w_hh, b=b, h0=h0, c0=c0, w_proj=w_proj)
    check_ndim("x", x, 3)
    B, T, C = x.shape
    if B == 0 or T == 0:
        raise ValueError(f"x: an empty batch (shape {x.shape}); the LSTM needs B >= 1 and T >= 1")
    check_ndim("w_ih", w_ih, 2)
    H4 = w_ih.shape[0]
    if H4 % 4:
        raise ValueError(f"w_ih: expected 4H rows (gates i, f, g, o), got shape {w_ih.shape}")
    H = H4 // 4
    check_shape("w_ih", w_ih, (4 * H, C))
    P = H if w_proj is None else w_proj.shape[0]
    if w_proj is not None:
        check_shape("w_proj", w_proj, (P, H))
    check_shape("w_hh", w_hh, (4 * H, P))
    check_shape("b", b, (4 * H,))
    if h0 is not None:
        check_shape("h0 (initial hidden state)", h0, (B, P))
    if c0 is not None:
        check_shape("c0 (initial cell state)", c0, (B, H))
    lengths = check_lengths(lengths, B, T)
    valid = np.arange(T)[:, None] < lengths[None, :]             # (T, B)
    padded = not bool(valid.all())
    pointwise = kernels.get("lstm_pointwise_forward") or lstm_pointwise_forward_numpy

    xt = np.ascontiguousarray(x.transpose(1, 0, 2))              # (B, T, C) -> (T, B, C)
    xw = (xt.reshape(T * B, C) @ w_ih.T + b).reshape(T, B, 4 * H)  # all steps' input projection, one GEMM
    h = np.empty((T + 1, B, P), dtype=dtype)                     # (T+1, B, P)
    c = np.empty((T + 1, B, H), dtype=dtype)                     # (T+1, B, H)
    h[0] = 0 if h0 is None else h0
    c[0] = 0 if c0 is None else c0
    gates = np.empty((T, B, 4 * H), dtype=dtype)                 # (T, B, 4H)
    tc = np.empty((T, B, H), dtype=dtype)                        # (T, B, H)
    hc = np.empty((T, B, H), dtype=dtype)                        # (T, B, H)
    z = np.empty((B, 4 * H), dtype=dtype)                        # (B, 4H)
    w_hh_t = np.ascontiguousarray(w_hh.T)                        # (P, 4H)
    w_proj_t = None if w_proj is None else np.ascontiguousarray(w_proj.T)  # (H, P)
    for t in range(T):
        np.matmul(h[t], w_hh_t, out=z)                           # h_{t-1} W_hh^T
        z += xw[t]                                               # z_t (B, 4H)
        pointwise(z, c[t], valid[t], gates[t], c[t + 1], tc[t], hc[t])
        if w_proj is None and not padded:
            h[t + 1] = hc[t]                                     # h_t = o tanh(c_t)
        else:
            hn = hc[t] if w_proj is None else hc[t] @ w_proj_t   # (B, P)
            h[t + 1] = np.where(valid[t][:, None], hn, h[t]) if padded else hn
    out = h[1:] * valid[:, :, None] if padded else h[1:]         # zero past each length
    y = np.ascontiguousarray(out.transpose(1, 0, 2))             # (T, B, P) -> (B, T, P)
    cache = LSTMCache(xt, w_ih, w_hh, w_proj, h, c, gates, tc, hc, valid, padded)
    return (y, h[T].copy(), c[T].copy()), cache


def lstm_backward(dy, cache: LSTMCache, dh_n=None, dc_n=None):
    """dy (B, T, P), dh_n (B, P) / dc_n (B, H) or None -> (dx (B, T, C), dh0 (B, P),
    dc0 (B, H), dw_ih (4H, C), dw_hh (4H, P), db (4H,), dw_proj (P, H) or None)."""
    xt, w_ih, w_hh, w_proj, h, c, gates, tc, hc, valid, padded = cache
    T, B, C = xt.shape
    H, P = c.shape[2], h.shape[2]
    dtype = h.dtype
    check_float("dy", dy)
    check_shape("dy", dy, (B, T, P))
    pointwise = kernels.get("lstm_pointwise_backward") or lstm_pointwise_backward_numpy
    dyt = dy.transpose(1, 0, 2).astype(dtype, copy=False)        # (T, B, P)
    if padded:
        dyt = dyt * valid[:, :, None]                            # outputs past a length are constant 0
    dh_next = np.zeros((B, P), dtype) if dh_n is None else np.array(dh_n, dtype=dtype)   # (B, P)
    dc_next = np.zeros((B, H), dtype) if dc_n is None else np.array(dc_n, dtype=dtype)   # (B, H)
    if dh_n is not None:
        check_shape("dh_n", dh_n, (B, P))
    if dc_n is not None:
        check_shape("dc_n", dc_n, (B, H))
    dc_prev = np.empty((B, H), dtype)                            # (B, H)
    dZ = np.empty((T, B, 4 * H), dtype)                          # (T, B, 4H)
    dH = np.empty((T, B, P), dtype) if w_proj is not None else None   # dL/dh_t, for dW_proj
    for t in range(T - 1, -1, -1):
        dh = dyt[t] + dh_next                                    # (B, P) dL/dh_t
        if w_proj is None:
            dhc = dh
        else:
            dH[t] = dh
            dhc = dh @ w_proj                                    # (B, H) through h_t = hc W_proj^T
        pointwise(dhc, dc_next, gates[t], c[t], tc[t], valid[t], dZ[t], dc_prev)
        dh_next = dZ[t] @ w_hh                                   # (B, P) dL/dh_{t-1} via z_t
        if padded:
            dh_next += dh * ~valid[t][:, None]                   # carried rows pass dh through
        dc_next, dc_prev = dc_prev, dc_next                      # dc_prev becomes the next step's dc_next
    dZ2 = dZ.reshape(T * B, 4 * H)                               # (T B, 4H)
    dx = (dZ2 @ w_ih).reshape(T, B, C).transpose(1, 0, 2)        # (B, T, C)
    dw_ih = dZ2.T @ xt.reshape(T * B, C)                         # (4H, C)
    dw_hh = dZ2.T @ h[:T].reshape(T * B, P)                      # (4H, P)
    db = dZ2.sum(axis=0)                                         # (4H,)
    dw_proj = None
    if w_proj is not None:                                       # hc = 0 on padded steps: no contribution
        dw_proj = dH.reshape(T * B, P).T @ hc.reshape(T * B, H)  # (P, H)
    return np.ascontiguousarray(dx), dh_next, dc_next, dw_ih, dw_hh, db, dw_proj
