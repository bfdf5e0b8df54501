"""Relative positional attention of Transformer-XL (Dai et al. 2019, "Transformer-XL:
Attentive Language Models Beyond a Fixed-Length Context", Sec. 3.3) with XLNet's
relative segment term (Yang et al. 2019, "XLNet: Generalized Autoregressive Pretraining
for Language Understanding", Sec. 2.5), forward and backward.

For query i and key j (head n, head size D, scale 1/sqrt(D)):

    score[i, j] = ( (q_i + u) . k_j                 content term   (u = r_w_bias)
                  + (q_i + v) . r_{i-j}             position term  (v = r_r_bias)
                  + (q_i + b) . s_{ij} ) / sqrt(D)  segment term   (b = r_s_bias)

with r_m = R_m W_r the projected sinusoid of the *relative* distance m = i - j, and
s_{ij} = seg_embed[0] when i and j are in the same segment, seg_embed[1] otherwise.

**The relative shift.** The position term is first computed against every encoding in
the table, ``bd_full[i, m] = (q_i + v) . r_m`` for the R = S + T distances
S, S-1, ..., -T+1 (``relative_sinusoid``), and then each row i is slid so that column j
holds distance i - j (+ S - T): ``bd[i, j] = bd_full[i, T - i + j]``. Transformer-XL does
this without a gather: view the (T, R) block as (R, T), drop its first row, view the rest
as (T, R - 1) and keep the first S columns (``rel_shift_forward``). Every step is a
relabelling of memory or a slice, so the backward is the same steps in reverse: pad the
dropped columns with zeros, view as (R - 1, T), put back a zero first row, view as (T, R).

The masked softmax and the weighted sum are ``attention_forward`` with the content
queries q + u and the position and segment terms as its additive ``bias``; a row that may
attend to nothing gives a zero output (minipt's rule for an empty row).
"""
from __future__ import annotations

import math

import numpy as np

from ..core.checks import check_same_dtype
from .attention import attention_backward, attention_forward


def relative_sinusoid(T: int, S: int, C: int, dtype=np.float32) -> np.ndarray:
    """The (S + T, C) encodings of the distances S, S-1, ..., -T+1 (XLNet's "bi" attention):
    [sin(m f), cos(m f)] with f_k = 10000^(-2k/C), sines in the first half, cosines in the second."""
    if C % 2:
        raise ValueError(f"relative sinusoids need an even width, got C = {C}")
    m = np.arange(S, -T, -1, dtype=np.float64)                        # (R,) distances, R = S + T
    inv_freq = 1.0 / 10000.0 ** (np.arange(0, C, 2, dtype=np.float64) / C)   # (C/2,)
    ang = m[:, None] * inv_freq[None, :]                               # (R, C/2)
    return np.concatenate([np.sin(ang), np.cos(ang)], axis=1).astype(dtype)   # (R, C)


def rel_shift_forward(x: np.ndarray, S: int):
    """x (B, H, T, R) scores against the R distances -> y (B, H, T, S), y[i, j] = x[i, T - i + j]."""
    B, H, T, R = x.shape
    if R - 1 < S:
        raise ValueError(f"rel_shift: {R} distances cannot cover {S} keys for {T} queries (need R >= S + 1)")
    x = np.ascontiguousarray(x)
    y = x.reshape(B, H, R, T)[:, :, 1:, :]                             # (B, H, R, T) -> drop row 0
    y = y.reshape(B, H, T, R - 1)[..., :S]                             # (B, H, T, R-1) -> first S columns
    return y, (x.shape, S)


def rel_shift_backward(dy: np.ndarray, cache) -> np.ndarray:
    """dy (B, H, T, S) -> dx (B, H, T, R): the forward's slices padded with zeros, views undone."""
    (B, H, T, R), S = cache
    d = np.zeros((B, H, T, R - 1), dtype=dy.dtype)
    d[..., :S] = dy                                                    # undo [..., :S]
    d = d.reshape(B, H, R - 1, T)                                      # undo the (T, R-1) view
    dx = np.concatenate([np.zeros((B, H, 1, T), dtype=dy.dtype), d], axis=2)   # undo [:, :, 1:]
    return dx.reshape(B, H, T, R)                                      # undo the (R, T) view


def relative_attention_forward(q, k, v, kr, r_w_bias, r_r_bias, mask=None, seg=None, r_s_bias=None,
                               seg_embed=None):
    """q (B,T,H,D), k, v (B,S,H,D), kr (R,H,D) projected encodings, r_w_bias, r_r_bias (H,D),
    mask (B,T,S) bool may-attend or None, seg (B,T,S) bool "different segment" or None with
    r_s_bias (H,D), seg_embed (2,H,D) -> out (B,T,H,D), cache."""
    check_same_dtype(q=q, k=k, v=v, kr=kr, r_w_bias=r_w_bias, r_r_bias=r_r_bias, r_s_bias=r_s_bias,
                     seg_embed=seg_embed)
    B, T, H, D = q.shape
    S = k.shape[1]
    if k.shape != (B, S, H, D) or v.shape != k.shape:
        raise ValueError(f"k {k.shape} and v {v.shape} must both be (B, S, H, D) with (B, H, D) of q {q.shape}")
    if kr.ndim != 3 or kr.shape[1:] != (H, D):
        raise ValueError(f"kr: expected (R, H, D) = (R, {H}, {D}), got {kr.shape}")
    if (seg is None) != (seg_embed is None) or (seg is None) != (r_s_bias is None):
        raise ValueError("seg, r_s_bias and seg_embed come together (all None for one segment)")
    scale = 1.0 / math.sqrt(D)
    qt = q.transpose(0, 2, 1, 3)                                       # (B, H, T, D)
    qr = qt + r_r_bias[None, :, None, :]                               # q + v  (B, H, T, D)
    bd_full = qr @ kr.transpose(1, 2, 0)[None]                         # (B, H, T, D) @ (1, H, D, R) -> (B, H, T, R)
    bias, shift = rel_shift_forward(bd_full, S)                        # (B, H, T, S): distance i - j
    qs = e2 = None
    if seg is not None:
        qs = qt + r_s_bias[None, :, None, :]                           # q + b  (B, H, T, D)
        e2 = np.einsum("bhtd,shd->bhts", qs, seg_embed)                # (B, H, T, 2): same / different segment
        bias = bias + np.where(seg[:, None], e2[..., 1:2], e2[..., 0:1])   # (B, H, T, S)
    out, att = attention_forward(qt + r_w_bias[None, :, None, :], k.transpose(0, 2, 1, 3),
                                 v.transpose(0, 2, 1, 3), mask, bias=bias * scale, scale=scale)
    cache = (att, shift, qr, kr, seg, qs, seg_embed, scale)
    return out.transpose(0, 2, 1, 3), cache                            # (B, T, H, D)


def relative_attention_backward(dout, cache):
    """dout (B,T,H,D) -> dq, dk, dv, dkr, dr_w_bias, dr_r_bias, dr_s_bias, dseg_embed
    (the last two None for one segment)."""
    att, shift, qr, kr, seg, qs, seg_embed, scale = cache
    dqw, dk, dv, dbias = attention_backward(np.ascontiguousarray(dout.transpose(0, 2, 1, 3)), att)
    dsum = dbias * scale                                               # d(bd + ef)  (B, H, T, S)
    dbd_full = rel_shift_backward(dsum, shift)                         # (B, H, T, R)
    dqr = dbd_full @ kr.transpose(1, 0, 2)[None]                       # (B, H, T, R) @ (1, H, R, D) -> (B, H, T, D)
    dkr = np.einsum("bhtr,bhtd->rhd", dbd_full, qr)                    # (R, H, D)
    dq = dqw + dqr
    dr_s = dseg = None
    if seg is not None:
        diff = seg[:, None]                                            # (B, 1, T, S)
        de2 = np.stack([np.where(diff, 0.0, dsum).sum(-1), np.where(diff, dsum, 0.0).sum(-1)], axis=-1)
        de2 = de2.astype(dsum.dtype)                                   # (B, H, T, 2)
        dqs = np.einsum("bhts,shd->bhtd", de2, seg_embed)              # (B, H, T, D)
        dseg = np.einsum("bhts,bhtd->shd", de2, qs)                    # (2, H, D)
        dr_s = dqs.sum(axis=(0, 2))                                    # (H, D)
        dq = dq + dqs
    return (dq.transpose(0, 2, 1, 3), dk.transpose(0, 2, 1, 3), dv.transpose(0, 2, 1, 3), dkr,
            dqw.sum(axis=(0, 2)), dqr.sum(axis=(0, 2)), dr_s, dseg)
