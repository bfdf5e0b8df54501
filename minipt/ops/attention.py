"""Scaled dot-product attention (Vaswani et al. 2017), forward and backward.

    S = Q K^T / sqrt(D) + bias,  P = softmax(S masked),  P' = dropout(P),  O = P' V

Masks are boolean "may attend" arrays (True = may attend) of shape (T, S), (B, T, S) or
(B, 1, T, S); ``causal=True`` adds the left-to-right mask, offset by S - T so a query at
position i of a KV-cached step sees keys j <= i + (S - T). A row with nothing to attend
to (all padding) gives a zero output and zero gradients, never NaN.

Backward, line by line from the bottom of the forward:
    dV = P'^T dO;  dP' = dO V^T;  dP = dP' * dropout mask
    dS = P * (dP - sum_j dP P)              (softmax backward; masked entries have P = 0)
    dbias = dS (summed over broadcast axes);  dQ = dS K / sqrt(D);  dK = dS^T Q / sqrt(D)
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..core.checks import check_same_dtype
from .softmax import softmax_backward

# The fast paths (no dropout; no mask, a key-padding mask or the causal rule; an optional
# bias) are two Numba versions of the same attention, each the other's twin. "blas"
# (minipt.kernels.attention): BLAS products around a Numba softmax, the batch cut into
# parts on threads. "fused" (minipt.kernels.fused_attention): the whole attention per
# (batch, head) in one kernel, in tiles. Whole training steps against torch eager
# (benchmarks/bench_gpt.py, bench_bert.py, bench_t5.py, 7 rounds, each path run twice,
# this 2-core AVX-512 VM): GPT "fused" 0.94 / 0.90 / 0.93x torch at S / M / L against
# "blas" 0.88 / 0.90 / 0.98x (a second pair: 0.89-0.94 / 0.84 / 0.91 against 0.87-0.88 /
# 0.85 / 0.95); at S, BERT 0.83 / 0.82 against 0.88 / 0.92, T5 1.02 / 1.02 against
# 1.24 / 0.98. So "blas" is the default everywhere, and "fused" (compiled only when
# chosen) is its twin. Alone, outside a step (benchmarks/bench_attention.py), "fused" is
# the faster of the two for causal attention at T 128-256 ("blas" at 0.80x its speed) and
# the slower for bidirectional attention with D 64 ("blas" at 1.52x): inside a step the
# BLAS products are what holds up.
FAST_PATH = "blas"


def _check(q, k, v, mask, bias):
    check_same_dtype(q=q, k=k, v=v, bias=bias)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be (B, H, T, D); got {q.shape}, {k.shape}, {v.shape}")
    if k.shape != v.shape:
        raise ValueError(f"k {k.shape} and v {v.shape} must have the same shape (B, H, S, D)")
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {q.shape} and k {k.shape} disagree on batch, heads or head size")
    B, H, T, _ = q.shape
    S = k.shape[2]
    if mask is not None:
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise TypeError("mask must be a boolean may-attend array (True = may attend)")
        want = {2: (T, S), 3: (B, T, S), 4: (B, 1, T, S)}.get(mask.ndim)
        if want is None or any(m not in (1, w) for m, w in zip(mask.shape, want)) or mask.shape[-1] != S:
            raise ValueError(f"mask shape {mask.shape} does not fit (T, S) = ({T}, {S}) with batch {B}: "
                             "expected (T, S), (B, T, S) or (B, 1, T, S) (size-1 axes broadcast)")
    if bias is not None and bias.shape not in ((H, T, S), (B, H, T, S), (1, H, T, S)):
        raise ValueError(f"bias shape {bias.shape} does not fit (H, T, S) = ({H}, {T}, {S})")


def combine_masks(*masks: np.ndarray | None) -> np.ndarray | None:
    """Logical AND of may-attend masks (None = no restriction): the one place masks are
    combined. Shapes (T, S), (B, T, S) and (B, 1, T, S) broadcast; a (B, T, S) mask
    meeting a 4-D one gets its head axis first."""
    given = [m for m in masks if m is not None]
    if any(m.ndim == 4 for m in given):
        given = [m[:, None] if m.ndim == 3 else m for m in given]       # (B, T, S) -> (B, 1, T, S)
    out = None
    for m in given:
        out = m if out is None else (out & m)
    return out


def allowed_mask(T: int, S: int, mask: np.ndarray | None, causal: bool) -> np.ndarray | None:
    """Combine a may-attend mask and the causal rule into one array broadcastable to
    (B, H, T, S), or None when everything is allowed."""
    if mask is not None and mask.ndim == 3:
        mask = mask[:, None]                                     # (B, T, S) -> (B, 1, T, S)
    tri = np.arange(S)[None, :] <= np.arange(T)[:, None] + (S - T) if causal else None   # (T, S)
    return combine_masks(mask, tri)


def key_mask(mask: np.ndarray | None, S: int) -> np.ndarray | None:
    """The (1 or B, S) keys a may-attend mask allows when it allows the same keys to every
    query and head (key padding: (1, S), (B, 1, S), (B, 1, 1, S)), else None."""
    if mask is None or any(n != 1 for n in mask.shape[1 if mask.ndim > 2 else 0:-1]):
        return None
    return mask.reshape(-1, S)


def attention_forward(q, k, v, mask=None, *, causal=False, bias=None, dropout_p=0.0,
                      rng=None, training=True, scale=None):
    """q (B,H,T,D), k, v (B,H,S,D) -> out (B,H,T,D), cache (cache["p"] holds the weights)."""
    _check(q, k, v, mask, bias)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    S = k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    keys = key_mask(mask, S)
    if kernels.ENABLED and (mask is None or keys is not None) and not (dropout_p and training):
        path = FAST_PATH
        b4 = None if bias is None else bias.reshape(-1, *bias.shape[-3:])   # (1 or B, H, T, S)
        out, p = kernels.get(f"{path}_attention_forward")(q, k, v, scale, causal, keys, b4)
        return out, {"q": q, "k": k, "v": v, "p": p, "scale": scale, "causal": causal, "keys": keys,
                     "bias_shape": None if bias is None else bias.shape, "path": path}
    return attention_forward_numpy(q, k, v, mask, causal, bias, dropout_p, rng, training, scale)


def attention_forward_numpy(q, k, v, mask, causal, bias, dropout_p, rng, training, scale):
    """The NumPy twin: stacked matmuls, a masked max-subtracted softmax, dropout."""
    T, S = q.shape[2], k.shape[2]
    s = (q @ k.swapaxes(-1, -2)) * scale                          # (B, H, T, S)
    if bias is not None:
        s += bias
    ok = allowed_mask(T, S, mask, causal)
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)                             # (B, H, T, 1)
    m = np.where(np.isfinite(m), m, 0.0).astype(s.dtype)          # all-masked rows
    e = np.exp(s - m)                                             # masked: exp(-inf) = 0
    denom = e.sum(axis=-1, keepdims=True)
    p = e / np.where(denom > 0, denom, 1.0).astype(s.dtype)       # (B, H, T, S)
    drop = None
    if dropout_p and training:
        if rng is None:
            raise ValueError("attention dropout in training mode needs an np.random.Generator")
        drop = (rng.random(p.shape, dtype=p.dtype) >= dropout_p) * p.dtype.type(1.0 / (1.0 - dropout_p))
    pd = p if drop is None else p * drop                          # (B, H, T, S)
    out = pd @ v                                                  # (B, H, T, D)
    return out, {"q": q, "k": k, "v": v, "p": p, "pd": pd, "drop": drop, "scale": scale,
                 "bias_shape": None if bias is None else bias.shape}


def attention_backward(dout, cache, out=None):
    """dout (B,H,T,D) -> dq (B,H,T,D), dk, dv (B,H,S,D), dbias (bias shape) or None. out:
    (dq, dk, dv) arrays to write the gradients into (any strides), or None for new ones."""
    path = cache.get("path")
    if path:
        dq, dk, dv, ds = kernels.get(f"{path}_attention_backward")(
            dout, cache["q"], cache["k"], cache["v"], cache["p"], cache["scale"], cache["causal"], cache["keys"],
            cache["bias_shape"] is not None, out)                 # ds (B, H, T, S) unscaled, or None
        return dq, dk, dv, bias_grad(ds, cache["bias_shape"])
    dq, dk, dv, dbias = attention_backward_numpy(dout, cache)
    if out is None:
        return dq, dk, dv, dbias
    for dst, src in zip(out, (dq, dk, dv)):
        dst[...] = src
    return (*out, dbias)


def attention_backward_numpy(dout, cache):
    """The NumPy twin of the backward."""
    q, k, v, p, pd, drop = (cache[n] for n in ("q", "k", "v", "p", "pd", "drop"))
    dv = pd.swapaxes(-1, -2) @ dout                               # (B, H, S, D)
    dp = dout @ v.swapaxes(-1, -2)                                # (B, H, T, S)
    if drop is not None:
        dp *= drop
    ds = softmax_backward(dp, p)                                  # (B, H, T, S)
    dbias = bias_grad(ds, cache["bias_shape"])
    ds *= cache["scale"]
    dq = ds @ k                                                   # (B, H, T, D)
    dk = ds.swapaxes(-1, -2) @ q                                  # (B, H, S, D)
    return dq, dk, dv, dbias


def bias_grad(ds, bias_shape):
    """ds (B, H, T, S), the scores' gradient before the scale -> dbias of shape bias_shape
    (summed over the batch axis the bias was broadcast along), or None without a bias."""
    if bias_shape is None:
        return None
    if len(bias_shape) == 3:
        return ds.sum(axis=0)                                     # (H, T, S)
    return ds.sum(axis=0, keepdims=True) if bias_shape[0] == 1 and ds.shape[0] > 1 else ds.copy()
