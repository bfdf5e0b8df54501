"""word2vec's loss: logistic regressions of an averaged input vector against output rows
(Mikolov, Chen, Corrado & Dean 2013a; Mikolov, Sutskever, Chen, Corrado & Dean 2013b).

Both output layers of word2vec are one computation. An example has input words ``ctx``
(the context window for CBOW, one context word for skip-gram) whose vectors are averaged,

    h = mean_{c in ctx} v_in[c],

and output rows r_1..r_L with labels y_l in {0, 1}; its loss is

    loss = - sum_l [ y_l log sigma(h . v_out[r_l]) + (1 - y_l) log sigma(-h . v_out[r_l]) ].

- **negative sampling** (2013b, eq. 4): rows = [target, k words from the unigram^0.75
  table], labels = [1, 0, ..., 0];
- **hierarchical softmax** (2013b, eq. 3; Morin & Bengio 2005): rows = the inner nodes on
  the Huffman path to the target, labels = 1 - the path's code bits (word2vec.c's
  convention), so P(target) is the product of the path's sigmoids.

Padding is -1 in ``ctx`` and ``rows``. ``word2vec_loss_forward/backward`` are the op pair
(mean over examples; gradchecked). ``word2vec_sgd`` is the training inner loop: for each
example in turn, the gradient of its loss taken at the current vectors (all rows scored
first, then updated) and applied with step ``lr``, as word2vec.c does one example at a
time. word2vec.c adds the input error unscaled to every CBOW context word; here it is
divided by the window's count, the exact gradient of the mean. The sigmoid is exact (no
table, no clipping at +-6). The Numba kernel ``minipt.kernels.word2vec`` runs the same
loop; ``word2vec_sgd_numpy`` is its twin.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..core.checks import check_float


def word2vec_loss_forward(v_in: np.ndarray, v_out: np.ndarray, ctx: np.ndarray, rows: np.ndarray,
                          labels: np.ndarray):
    """v_in (V, C), v_out (R, C), ctx (N, K) ids, rows (N, L) ids, labels (N, L) -> loss (), scores (N, L)."""
    check_float("v_in", v_in)
    check_float("v_out", v_out)
    cmask, omask = ctx >= 0, rows >= 0                                     # (N, K), (N, L)
    count = cmask.sum(axis=1)                                              # (N,)
    if (count == 0).any():
        raise ValueError(f"ctx: example {int(np.argmin(count))} has no input word (all -1)")
    c, r = np.where(cmask, ctx, 0), np.where(omask, rows, 0)
    h = (v_in[c] * cmask[..., None]).sum(axis=1) / count[:, None].astype(v_in.dtype)  # (N, C)
    u = v_out[r]                                                           # (N, L, C)
    x = np.einsum("nc,nlc->nl", h, u)                                      # (N, L)
    sign = 2.0 * labels - 1.0                                              # (N, L)
    loss = (np.logaddexp(0.0, -sign * x) * omask).sum() / len(ctx)         # -log sigma(+-x)
    return np.asarray(loss, dtype=v_in.dtype), x, (v_in.shape, v_out.shape, c, cmask, count, r, omask, h, u,
                                                   x, labels)


def word2vec_loss_backward(dloss, cache):
    """dloss () -> dv_in (V, C), dv_out (R, C)."""
    in_shape, out_shape, c, cmask, count, r, omask, h, u, x, labels = cache
    N = len(c)
    sig = 0.5 * (1.0 + np.tanh(0.5 * x))                                   # sigma(x) (N, L)
    dx = (sig - labels) * omask * (float(dloss) / N)                       # (N, L)
    dh = np.einsum("nl,nlc->nc", dx, u)                                    # (N, C)
    dv_out = np.zeros(out_shape, dtype=h.dtype)
    np.add.at(dv_out, r.reshape(-1), (dx[..., None] * h[:, None, :]).reshape(-1, out_shape[1]))
    dv_in = np.zeros(in_shape, dtype=h.dtype)
    share = (dh / count[:, None])[:, None, :] * cmask[..., None]           # (N, K, C)
    np.add.at(dv_in, c.reshape(-1), share.reshape(-1, in_shape[1]))
    return dv_in, dv_out


def word2vec_sgd_numpy(v_in: np.ndarray, v_out: np.ndarray, ctx: np.ndarray, rows: np.ndarray,
                       labels: np.ndarray, lr: float, with_loss: bool = True) -> float:
    """One SGD step per example, in order, in place; returns the summed loss (each example's
    before its step; 0 unless ``with_loss``)."""
    total = 0.0
    for n in range(len(ctx)):
        c = ctx[n][ctx[n] >= 0]                                            # (K',)
        keep = rows[n] >= 0
        r, y = rows[n][keep], labels[n][keep]                              # (L',)
        h = v_in[c].mean(axis=0)                                           # (C,)
        u = v_out[r]                                                       # (L', C)
        x = u @ h                                                          # (L',)
        if with_loss:
            total += float(np.logaddexp(0.0, -(2.0 * y - 1.0) * x).sum())
        g = (lr * (y - 0.5 * (1.0 + np.tanh(0.5 * x)))).astype(v_in.dtype)  # -lr dloss/dx (L',)
        e = g @ u                                                          # (C,)
        np.add.at(v_out, r, g[:, None] * h[None, :])
        np.add.at(v_in, c, np.broadcast_to(e / len(c), (len(c), len(e))).astype(v_in.dtype))
    return total


def word2vec_sgd(v_in: np.ndarray, v_out: np.ndarray, ctx: np.ndarray, rows: np.ndarray,
                 labels: np.ndarray, lr: float, with_loss: bool = False) -> float:
    """The training inner loop: the Numba kernel when kernels are on, else the NumPy twin."""
    fn = kernels.get("word2vec_sgd") or word2vec_sgd_numpy
    return fn(v_in, v_out, np.ascontiguousarray(ctx, dtype=np.int64), np.ascontiguousarray(rows, dtype=np.int64),
              np.ascontiguousarray(labels, dtype=v_in.dtype), float(lr), bool(with_loss))
