"""word2vec's training inner loop in Numba (twin: ``minipt.ops.word2vec.word2vec_sgd_numpy``).

For each example in order: h = mean of its input vectors; every output row scored with
the same h and the current v_out; g_l = lr (y_l - sigma(x_l)); v_out[r_l] += g_l h; each
input vector += (sum_l g_l v_out[r_l]) / count. One thread: the examples update shared
rows one after another, exactly like the twin (word2vec.c's threads race instead).
"""
from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, fastmath=True)
def word2vec_sgd(v_in, v_out, ctx, rows, labels, lr, with_loss):
    N, K = ctx.shape
    L = rows.shape[1]
    C = v_in.shape[1]
    h = np.empty(C, dtype=v_in.dtype)
    e = np.empty(C, dtype=v_in.dtype)
    g = np.empty(L, dtype=v_in.dtype)
    total = 0.0
    for n in range(N):
        count = 0
        h[:] = 0.0
        for k in range(K):
            c = ctx[n, k]
            if c >= 0:
                count += 1
                for j in range(C):
                    h[j] += v_in[c, j]
        for j in range(C):
            h[j] /= count
        e[:] = 0.0
        for l in range(L):                  # score every row with the current v_out first
            r = rows[n, l]
            if r < 0:
                continue
            x = 0.0
            for j in range(C):
                x += h[j] * v_out[r, j]
            if with_loss:                   # a third of the time: only when asked
                s = -x if labels[n, l] > 0.5 else x
                total += max(s, 0.0) + math.log1p(math.exp(-abs(s)))    # log(1 + e^s)
            g[l] = lr * (labels[n, l] - 0.5 * (1.0 + math.tanh(0.5 * x)))
            for j in range(C):
                e[j] += g[l] * v_out[r, j]
        for l in range(L):
            r = rows[n, l]
            if r >= 0:
                for j in range(C):
                    v_out[r, j] += g[l] * h[j]
        for k in range(K):
            c = ctx[n, k]
            if c >= 0:
                for j in range(C):
                    v_in[c, j] += e[j] / count
    return total
