"""Scaled dot-product attention (Vaswani et al. 2017) in one Numba kernel per
(batch, head), forward and backward; twin: the BLAS matmuls around the softmax kernels
(``minipt.kernels.attention``), and the NumPy op (``minipt.ops.attention``) under both.

Forward, for each query row i (keys j < n_i = i + S - T + 1 when causal, else S):
    s_j = scale q_i . k_j + bias_ij,   p_j = exp(s_j - max s) / sum exp,   o_i = sum_j p_j v_j
Backward, from the stored P:
    dp_j = do_i . v_j,   dbias_ij = p_j (dp_j - sum_j dp_j p_j),   ds_j = scale dbias_ij
    dq_i = sum_j ds_j k_j,   dk_j += sum_i ds_ij q_i,   dv_j += sum_i p_ij do_i
The causal half is never computed: row i stops at n_i rounded up to 8 (the few extra
columns get p = 0).

Masks and bias (BERT's key padding, T5's relative position bias). A key mask (1 or B, S)
says which keys each batch row may attend to: n_i is also cut after the last allowed key
(trailing padding costs nothing) and a row with no allowed key below n_i is all zeros;
masked keys before that get a score of -1e30 (finite: fastmath assumes no inf) and their
exponential times 0 (``_exp32`` stops at exp(-87)), so p = 0 there exactly. The additive
bias (1 or B, H, T, S) is added to the scaled scores; the backward writes dbias per batch
row (B, H, T, S), and the op sums it over the batch the bias was broadcast along.

Tiles. Queries go ``ROWS`` (16) at a time and keys ``KEYS`` (64) at a time: each head's
K^T and V^T are first copied into zero-padded blocks of 64 keys, (S'/64, D, 64), and
every product of a row tile runs key block by key block, so the block in use (8 KB at
D 32) stays in the L1 cache across the 16 rows. Row by row over whole K^T and V^T (32 KB
each at T 256) the forward took 16 % and the backward 14 % longer (single thread, B 8,
H 6, T 256, D 32). Inside a tile every inner loop runs along a contiguous axis and LLVM
vectorises it; the loops sum eight terms per load and store of the accumulator
(``_row_times``, ``_outer_rows``) or keep eight sums in registers (``_dots``): one
multiply-add per store left QK^T bound by memory traffic, 2.2x slower at T 256.
float32 uses the vectorisable ``_exp32`` of ``minipt.kernels.gelu``, float64 ``np.exp``.

Parallel over (batch, head) with ``prange``: a short loop calling ``_forward_head`` /
``_backward_head``, compiled once per dtype on the first call with that dtype
(``kernels.per_dtype``). What a first run pays (CPU seconds, float32 forward +
backward, one busy 2-core VM): the whole kernel inside the ``prange`` loop, 10.6 + 22.3 s
(the parallel passes worked over all of it), and both dtypes at import, 60 s; as here,
6.3 + 8.4 s. The mask and bias arguments are runtime branches, not new specialisations:
16.7 and 17.7 s with them against 16.0 and 15.7 s before them (two alternating pairs, a
VM at load 40-70). Copies into the outputs are loops, not slice assignments: each of those
pulled in Numba's formatting of its shape-mismatch error, about 2 s more.
"""
import numba
import numpy as np
from numba.extending import overload

from . import per_dtype
from .gelu import _exp32

_W = 8                                                    # unrolling width (terms per store)
ROWS = 16                                                 # query rows per tile
KEYS = 64                                                 # keys per block


def _exp(x):
    return np.exp(x)


@overload(_exp, inline="always")
def _exp_impl(x):
    if x == numba.types.float32:
        return lambda x: _exp32(x)
    return lambda x: np.exp(x)


@numba.njit(cache=True, inline="always", fastmath=True)
def _row_times(out, x, mt, n):
    """out[:n] += x @ mt[:, :n]: x (D,), mt (D, S') rows contiguous."""
    D = x.shape[0]
    d = 0
    while d + _W <= D:
        a0, a1, a2, a3, a4, a5, a6, a7 = x[d], x[d + 1], x[d + 2], x[d + 3], x[d + 4], x[d + 5], x[d + 6], x[d + 7]
        m0, m1, m2, m3, m4, m5, m6, m7 = mt[d], mt[d + 1], mt[d + 2], mt[d + 3], mt[d + 4], mt[d + 5], mt[d + 6], mt[d + 7]
        for j in range(n):
            out[j] += ((a0 * m0[j] + a1 * m1[j]) + (a2 * m2[j] + a3 * m3[j])) + \
                      ((a4 * m4[j] + a5 * m5[j]) + (a6 * m6[j] + a7 * m7[j]))
        d += _W
    for e in range(d, D):
        a, m = x[e], mt[e]
        for j in range(n):
            out[j] += a * m[j]


@numba.njit(cache=True, inline="always", fastmath=True)
def _dots(out, mt, w, n):
    """out[d] += mt[d, :n] . w[:n] for every d: mt (D, S'), w (S',); eight rows per pass."""
    D = mt.shape[0]
    zero = w.dtype.type(0.0)
    d = 0
    while d + _W <= D:
        m0, m1, m2, m3, m4, m5, m6, m7 = mt[d], mt[d + 1], mt[d + 2], mt[d + 3], mt[d + 4], mt[d + 5], mt[d + 6], mt[d + 7]
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
        for j in range(n):
            x = w[j]
            a0 += x * m0[j]
            a1 += x * m1[j]
            a2 += x * m2[j]
            a3 += x * m3[j]
            a4 += x * m4[j]
            a5 += x * m5[j]
            a6 += x * m6[j]
            a7 += x * m7[j]
        out[d] += a0
        out[d + 1] += a1
        out[d + 2] += a2
        out[d + 3] += a3
        out[d + 4] += a4
        out[d + 5] += a5
        out[d + 6] += a6
        out[d + 7] += a7
        d += _W
    for e in range(d, D):
        m = mt[e]
        a = zero
        for j in range(n):
            a += w[j] * m[j]
        out[e] += a


@numba.njit(cache=True, inline="always", fastmath=True)
def _outer_rows(out, w, x, n):
    """out[j, :] += sum_r w[r, j] x[r, :] for j < n: w (8, S'), x (8, D), out (S', D)."""
    D = x.shape[1]
    x0, x1, x2, x3, x4, x5, x6, x7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    for j in range(n):
        w0, w1, w2, w3, w4, w5, w6, w7 = w[0, j], w[1, j], w[2, j], w[3, j], w[4, j], w[5, j], w[6, j], w[7, j]
        o = out[j]
        for d in range(D):
            o[d] += ((w0 * x0[d] + w1 * x1[d]) + (w2 * x2[d] + w3 * x3[d])) + \
                    ((w4 * x4[d] + w5 * x5[d]) + (w6 * x6[d] + w7 * x7[d]))


@numba.njit(cache=True, inline="always")
def _padded(n):
    """n rounded up to a multiple of 8."""
    return (n + _W - 1) // _W * _W


@numba.njit(cache=True, inline="always")
def _seen(i, S, T, causal, span):
    """Keys 0 <= j < n query row i looks at: the causal limit, cut at span = (first, last + 1)
    of the keys its batch row may attend to; 0 when none of them is in reach."""
    n = min(i + S - T + 1 if causal else S, span[1])
    return n if span[0] < n else 0


@numba.njit(cache=True, inline="always")
def _keys(i, S, T, causal, span):
    """Keys query row i looks at, rounded up to a multiple of 8."""
    return _padded(_seen(i, S, T, causal, span))


@numba.njit(cache=True, inline="always")
def _key_blocks(k, v, b, h):
    """K^T and V^T of head (b, h) in blocks of KEYS keys, each (S'/KEYS, D, KEYS), zero past S."""
    S, D = k.shape[2], k.shape[3]
    nb = (S + KEYS - 1) // KEYS
    kb = np.zeros((nb, D, KEYS), dtype=k.dtype)
    vb = np.zeros((nb, D, KEYS), dtype=k.dtype)
    for j in range(S):
        for d in range(D):
            kb[j // KEYS, d, j % KEYS] = k[b, h, j, d]
            vb[j // KEYS, d, j % KEYS] = v[b, h, j, d]
    return kb, vb


@numba.njit(cache=True, inline="always")
def _key_mask(mask, b, S, Sp, dtype):
    """Batch row b's may-attend keys mask[b or 0] (S,) -> span (first, last + 1) of the keys
    it may attend to, holes (a masked key before its end) and keep (S',), 1 where allowed."""
    km = mask[b if mask.shape[0] > 1 else 0]
    keep = np.zeros(Sp, dtype=dtype)
    first, last, n = S, -1, 0
    for j in range(S):
        if km[j]:
            keep[j] = 1.0
            first, last, n = min(first, j), j, n + 1
    return (first, last + 1), n < last + 1, keep


@numba.njit(cache=True, inline="always")
def _softmax_row(row, n, holes, keep):
    """row[:n] <- softmax(row[:n]) over the keys with keep = 1 (the others get 0), row[n:] <- 0."""
    zero = row.dtype.type(0.0)
    if holes:
        low = row.dtype.type(-1e30)                                  # finite: fastmath assumes no inf
        for j in range(n):
            row[j] = row[j] if keep[j] != zero else low
    m = row[0]
    for j in range(n):
        m = max(m, row[j])
    total = zero
    for j in range(n):
        e = _exp(row[j] - m)
        if holes:
            e *= keep[j]                                             # _exp32 stops at exp(-87), not 0
        row[j] = e
        total += e
    if n > 0:
        inv = row.dtype.type(1.0) / total
        for j in range(n):
            row[j] *= inv
    row[n:] = zero


@numba.njit(cache=True, inline="always")
def _tile_row_times(out, mb, xs, i0, i1, S, T, causal, span, blocks):
    """out[i - i0, :n_i'] += xs[i - i0] @ M[:, :n_i'] for the tile's rows i0 <= i < i1, a key
    block at a time: M blocked as mb (S'/KEYS, D, KEYS), xs (ROWS, D), out (ROWS, S')."""
    for jb in range(blocks):
        for i in range(i0, i1):
            w = min(KEYS, _keys(i, S, T, causal, span) - jb * KEYS)
            if w > 0:
                _row_times(out[i - i0, jb * KEYS:jb * KEYS + w], xs[i - i0], mb[jb], w)


@numba.njit(cache=True, inline="always")
def _tile_dots(out, mb, rows, i0, i1, S, T, causal, span, blocks):
    """out[i - i0] += rows[i - i0] @ M for the tile's rows i0 <= i < i1, a key block at a
    time: M^T blocked as mb (S'/KEYS, D, KEYS), rows (ROWS, S'), out (ROWS, D)."""
    for jb in range(blocks):
        for i in range(i0, i1):
            w = min(KEYS, _keys(i, S, T, causal, span) - jb * KEYS)
            if w > 0:
                _dots(out[i - i0], mb[jb], rows[i - i0, jb * KEYS:jb * KEYS + w], w)


@numba.njit(cache=True, error_model="numpy", fastmath=True)
def _forward_head(q, k, v, sc, causal, mask, bias, out, p, b, h):
    """out[b, h] and p[b, h] of one head; sc the scale in q's dtype; mask (1 or B, S) keys
    batch row b may attend to; bias (1 or B, H, T, S) added to the scaled scores (none: 0 rows)."""
    T, D = q.shape[2], q.shape[3]
    S = k.shape[2]
    Sp = (S + KEYS - 1) // KEYS * KEYS
    zero = q.dtype.type(0.0)
    kb, vb = _key_blocks(k, v, b, h)                              # (S'/64, D, 64) each
    span, holes, keep = _key_mask(mask, b, S, Sp, q.dtype)
    qs = np.empty((ROWS, D), dtype=q.dtype)                       # scaled query rows of the tile
    o = np.empty((ROWS, D), dtype=q.dtype)
    rows = np.empty((ROWS, Sp), dtype=q.dtype)                    # scores, then weights
    for i0 in range(0, T, ROWS):
        i1 = min(i0 + ROWS, T)
        for i in range(i0, i1):
            for d in range(D):
                qs[i - i0, d] = q[b, h, i, d] * sc
        nblock = _keys(i1 - 1, S, T, causal, span)                      # columns the tile touches
        blocks = (nblock + KEYS - 1) // KEYS
        rows[:, :nblock] = zero
        _tile_row_times(rows, kb, qs, i0, i1, S, T, causal, span, blocks)   # scores = Q K^T
        for i in range(i0, i1):
            n = _seen(i, S, T, causal, span)
            if bias.shape[0] > 0:
                bi = bias[b if bias.shape[0] > 1 else 0, h, i]
                for j in range(n):
                    rows[i - i0, j] += bi[j]
            _softmax_row(rows[i - i0], n, holes, keep)
        o[:] = zero
        _tile_dots(o, vb, rows, i0, i1, S, T, causal, span, blocks)           # O = P V
        for i in range(i0, i1):
            for d in range(D):
                out[b, h, i, d] = o[i - i0, d]
            for j in range(S):
                p[b, h, i, j] = rows[i - i0, j]


@numba.njit(cache=True, error_model="numpy", fastmath=True)
def _backward_head(dout, q, k, v, p, sc, causal, mask, dq, dk, dv, dbias, b, h):
    """dq[b, h], dk[b, h] and dv[b, h] of one head, and dbias[b, h] (the bias's gradient
    before the sum over batch) unless dbias has 0 rows; sc the scale in q's dtype."""
    T, D = q.shape[2], q.shape[3]
    S = k.shape[2]
    Sp = (S + KEYS - 1) // KEYS * KEYS
    Tp = (T + ROWS - 1) // ROWS * ROWS
    zero = q.dtype.type(0.0)
    kb, vb = _key_blocks(k, v, b, h)                              # (S'/64, D, 64) each
    span = _key_mask(mask, b, S, Sp, q.dtype)[0]
    qq = np.zeros((Tp, D), dtype=q.dtype)                         # Q (T', D)
    gg = np.zeros((Tp, D), dtype=q.dtype)                         # dO (T', D)
    for i in range(T):
        for d in range(D):
            qq[i, d] = q[b, h, i, d]
            gg[i, d] = dout[b, h, i, d]
    dkh = np.zeros((Sp, D), dtype=q.dtype)                        # dK (S', D)
    dvh = np.zeros((Sp, D), dtype=q.dtype)                        # dV (S', D)
    pb = np.empty((ROWS, Sp), dtype=q.dtype)                      # P of the tile's rows
    ds = np.empty((ROWS, Sp), dtype=q.dtype)                      # dP, then dS
    dqb = np.empty((ROWS, D), dtype=q.dtype)
    for i0 in range(0, Tp, ROWS):
        i1 = min(i0 + ROWS, T)
        nblock = _keys(i1 - 1, S, T, causal, span)                      # columns the tile touches
        blocks = (nblock + KEYS - 1) // KEYS
        pb[:, :nblock] = zero
        ds[:, :nblock] = zero
        for i in range(i0, i1):
            for j in range(_seen(i, S, T, causal, span)):
                pb[i - i0, j] = p[b, h, i, j]
        _tile_row_times(ds, vb, gg[i0:i0 + ROWS], i0, i1, S, T, causal, span, blocks)   # dP = dO V^T
        for i in range(i0, i1):                                   # dS = scale P (dP - sum_j dP P)
            pr, dr = pb[i - i0], ds[i - i0]
            dot = zero
            for j in range(_seen(i, S, T, causal, span)):
                dot += dr[j] * pr[j]
            for j in range(nblock):
                dr[j] = pr[j] * (dr[j] - dot)                     # 0 where p = 0
            if dbias.shape[0] > 0:                                 # dbias = dS before the scale
                dbi = dbias[b, h, i]
                for j in range(S):
                    dbi[j] = dr[j] if j < nblock else zero
            for j in range(nblock):
                dr[j] *= sc
        dqb[:] = zero
        _tile_dots(dqb, kb, ds, i0, i1, S, T, causal, span, blocks)           # dQ = dS K
        for i in range(i0, i1):
            for d in range(D):
                dq[b, h, i, d] = dqb[i - i0, d]
        for jb in range(blocks):                                  # dK += dS^T Q, dV += P^T dO
            j0, w = jb * KEYS, min(KEYS, nblock - jb * KEYS)
            for r in range(0, ROWS, _W):
                _outer_rows(dkh[j0:j0 + w], ds[r:r + _W, j0:j0 + w], qq[i0 + r:i0 + r + _W], w)
                _outer_rows(dvh[j0:j0 + w], pb[r:r + _W, j0:j0 + w], gg[i0 + r:i0 + r + _W], w)
    for j in range(S):
        for d in range(D):
            dk[b, h, j, d] = dkh[j, d]
            dv[b, h, j, d] = dvh[j, d]


def _forward(q, k, v, scale, causal, mask, bias, out, p):
    H = q.shape[1]
    sc = q.dtype.type(scale)
    for bh in numba.prange(q.shape[0] * H):
        _forward_head(q, k, v, sc, causal, mask, bias, out, p, bh // H, bh % H)


def _backward(dout, q, k, v, p, scale, causal, mask, dq, dk, dv, dbias):
    H = q.shape[1]
    sc = q.dtype.type(scale)
    for bh in numba.prange(q.shape[0] * H):
        _backward_head(dout, q, k, v, p, sc, causal, mask, dq, dk, dv, dbias, bh // H, bh % H)


def _forward_signature(t):
    a4, c4 = t[:, :, :, :], t[:, :, :, ::1]                   # any strides; C-contiguous
    m2 = numba.boolean[:, :]
    return numba.void(a4, a4, a4, numba.float64, numba.boolean, m2, a4, c4, c4)


def _backward_signature(t):
    a4, c4 = t[:, :, :, :], t[:, :, :, ::1]
    m2 = numba.boolean[:, :]
    return numba.void(a4, a4, a4, a4, c4, numba.float64, numba.boolean, m2, a4, a4, a4, c4)


_forward_jit = per_dtype(_forward, _forward_signature, parallel=True, cache=True)
_backward_jit = per_dtype(_backward, _backward_signature, parallel=True, cache=True)


def _keys_mask(mask, S):
    """None or a key mask (1 or B, S) -> a writable (1 or B, S) boolean array (all True for None)."""
    return np.ones((1, S), dtype=bool) if mask is None else np.require(mask, requirements="W")


def fused_attention_forward(q, k, v, scale, causal, mask=None, bias=None):
    """q (B,H,T,D), k, v (B,H,S,D), any strides; mask (1 or B, S) bool keys each batch row may
    attend to, or None; bias (1 or B, H, T, S) or None -> out (B,H,T,D), p (B,H,T,S) (zeros
    where masked)."""
    B, H, T, D = q.shape
    out = np.empty((B, H, T, D), dtype=q.dtype)
    p = np.empty((B, H, T, k.shape[2]), dtype=q.dtype)
    if bias is None:
        bias = np.empty((0, 1, 1, 1), dtype=q.dtype)
    _forward_jit(q.dtype)(q, k, v, float(scale), bool(causal), _keys_mask(mask, k.shape[2]), bias, out, p)
    return out, p


def fused_attention_backward(dout, q, k, v, p, scale, causal, mask=None, bias=False):
    """dout (B,H,T,D), the forward's inputs and p -> dq (B,H,T,D), dk, dv (B,H,S,D) and, when
    the forward had a bias, dbias (B,H,T,S) per batch row (else None)."""
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    dbias = np.empty(p.shape if bias else (0, 1, 1, 1), dtype=q.dtype)
    _backward_jit(q.dtype)(dout, q, k, v, p, float(scale), bool(causal), _keys_mask(mask, k.shape[2]),
                           dq, dk, dv, dbias)
    return dq, dk, dv, dbias if bias else None
