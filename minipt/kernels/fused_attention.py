"""Scaled dot-product attention (Vaswani et al. 2017) in one Numba kernel per
(batch, head), forward and backward; twin: BLAS products around a softmax kernel
(``minipt.kernels.attention``, the op's default), and the NumPy op
(``minipt.ops.attention``) under both.

Forward, for each query row i (keys j < n_i = i + S - T + 1 when causal, else S):
    s_j = scale q_i . k_j + bias_ij,   p_j = exp(s_j - max s) / sum exp,   o_i = sum_j p_j v_j
Backward, from the stored P:
    dp_j = do_i . v_j,   dbias_ij = p_j (dp_j - sum_j dp_j p_j),   ds_j = scale dbias_ij
    dq_i = sum_j ds_j k_j,   dk_j += sum_i ds_ij q_i,   dv_j += sum_i p_ij do_i
The causal half is never computed: row i stops at n_i rounded up to 8 (the few extra
columns get p = 0). Masks and bias as in ``minipt.kernels.attention_rows``, with its helpers.

Tiles. Queries go ``ROWS`` (16) at a time, and every product of a row tile runs four
rows at a time, which share each load of the other operand: ``_rows_times`` (QK^T and
dO V^T along a block of 64 keys; dK^T += Q^T dS and dV^T += dO^T P along the keys)
sums four terms per load and store of each of four output rows, ``_rows_dots`` (E V and
dS K) keeps sixteen sums in registers along the keys. Against one row at a time (eight
terms per store) this took the forward from 10.5 to 8.0 ms and the backward from 12.9 to
11.1 ms (one thread, B 8 H 6 T 256 D 32 causal); softmax's row maximum as eight running
maxima (``_row_max``), which LLVM vectorises, another 1.3-1.5x on the forward. Inner loops
index whole rows from offsets the compiler knows are not negative: a column slice, or an
offset it cannot prove >= 0, leaves a runtime stride or a wraparound test in the loop and
LLVM does not vectorise it (11 against 53 GF/s). float32 uses the vectorisable
``_exp32`` of ``minipt.kernels.gelu``, float64 ``np.exp``. Even so the products reach
25-40 GF/s a thread where OpenBLAS reaches 90-140 on the same shapes, which is why
``minipt.kernels.attention``'s BLAS path is the op's default.

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

from . import per_dtype
from .attention_rows import (
    _exp_sum,
    _key_mask,
    _mask_and_bias,
    _prepare_row,
    _row_max,
    _seen,
)

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"attention_rows.py": "c8c5e41590ab0410"}

ROWS = 16                                                 # query rows per tile
_W = 8                                                    # rows of scores are padded to a multiple of this
KEYS = 64                                                 # keys per block


@numba.njit(cache=True, inline="always", fastmath=True)
def _rows_times(out, c, x, mt, n):
    """out[a, c:c + n] += x[a] @ mt[:, :n] for the four rows a < 4: out (4, S') and mt (D, S')
    rows contiguous (whole rows: a column slice would leave LLVM a runtime stride), x (4, D)
    any layout. The four rows share each load of mt (16 multiply-adds per 4 loads and 4
    stores, against 8 per 8 and 1 for one row at a time)."""
    D = x.shape[1]
    o0, o1, o2, o3 = out[0], out[1], out[2], out[3]
    d = 0
    while d + 4 <= D:
        a0, a1, a2, a3 = x[0, d], x[0, d + 1], x[0, d + 2], x[0, d + 3]
        b0, b1, b2, b3 = x[1, d], x[1, d + 1], x[1, d + 2], x[1, d + 3]
        c0, c1, c2, c3 = x[2, d], x[2, d + 1], x[2, d + 2], x[2, d + 3]
        e0, e1, e2, e3 = x[3, d], x[3, d + 1], x[3, d + 2], x[3, d + 3]
        m0, m1, m2, m3 = mt[d], mt[d + 1], mt[d + 2], mt[d + 3]
        for j in range(n):
            y0, y1, y2, y3 = m0[j], m1[j], m2[j], m3[j]
            o0[c + j] += (a0 * y0 + a1 * y1) + (a2 * y2 + a3 * y3)
            o1[c + j] += (b0 * y0 + b1 * y1) + (b2 * y2 + b3 * y3)
            o2[c + j] += (c0 * y0 + c1 * y1) + (c2 * y2 + c3 * y3)
            o3[c + j] += (e0 * y0 + e1 * y1) + (e2 * y2 + e3 * y3)
        d += 4
    for f in range(d, D):
        m = mt[f]
        for a in range(4):
            xa, oa = x[a, f], out[a]
            for j in range(n):
                oa[c + j] += xa * m[j]


@numba.njit(cache=True, inline="always", fastmath=True)
def _rows_dots(out, x, mt, n):
    """out[a, d] += x[a, :n] . mt[d, :n] for the four rows a < 4 and every d: x (4, S'),
    mt (D, S') rows contiguous. Sixteen sums (four rows by four d) stay in registers along
    the keys, so the long products (n up to T) make no stores until the end."""
    D = mt.shape[0]
    x0, x1, x2, x3 = x[0], x[1], x[2], x[3]
    zero = x.dtype.type(0.0)
    for d in range(0, D - D % 4, 4):
        m0, m1, m2, m3 = mt[d], mt[d + 1], mt[d + 2], mt[d + 3]
        s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = zero
        s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = zero
        for j in range(n):
            a0, a1, a2, a3 = x0[j], x1[j], x2[j], x3[j]
            y0, y1, y2, y3 = m0[j], m1[j], m2[j], m3[j]
            s00 += a0 * y0
            s01 += a0 * y1
            s02 += a0 * y2
            s03 += a0 * y3
            s10 += a1 * y0
            s11 += a1 * y1
            s12 += a1 * y2
            s13 += a1 * y3
            s20 += a2 * y0
            s21 += a2 * y1
            s22 += a2 * y2
            s23 += a2 * y3
            s30 += a3 * y0
            s31 += a3 * y1
            s32 += a3 * y2
            s33 += a3 * y3
        out[0, d] += s00
        out[0, d + 1] += s01
        out[0, d + 2] += s02
        out[0, d + 3] += s03
        out[1, d] += s10
        out[1, d + 1] += s11
        out[1, d + 2] += s12
        out[1, d + 3] += s13
        out[2, d] += s20
        out[2, d + 1] += s21
        out[2, d + 2] += s22
        out[2, d + 3] += s23
        out[3, d] += s30
        out[3, d + 1] += s31
        out[3, d + 2] += s32
        out[3, d + 3] += s33
    for d in range(D - D % 4, D):
        m = mt[d]
        for a in range(4):
            t = zero
            for j in range(n):
                t += x[a, j] * m[j]
            out[a, d] += t


@numba.njit(cache=True, inline="always")
def _padded(n):
    """n rounded up to a multiple of 8."""
    return (n + _W - 1) // _W * _W


@numba.njit(cache=True, inline="always")
def _keys(i, S, T, causal, span):
    """Keys query row i looks at, rounded up to a multiple of 8."""
    return _padded(_seen(i, S, T, causal, span))


@numba.njit(cache=True, inline="always")
def _key_blocks(k, b, h):
    """K^T of head (b, h) in blocks of KEYS keys, (S'/KEYS, D, KEYS), zero past S."""
    S, D = k.shape[2], k.shape[3]
    kb = np.zeros(((S + KEYS - 1) // KEYS, D, KEYS), dtype=k.dtype)
    for j in range(S):
        for d in range(D):
            kb[j // KEYS, d, j % KEYS] = k[b, h, j, d]
    return kb


@numba.njit(cache=True, inline="always")
def _key_columns(k, b, h):
    """K^T of head (b, h) whole, (D, S'), zero past S."""
    S, D = k.shape[2], k.shape[3]
    kt = np.zeros((D, (S + KEYS - 1) // KEYS * KEYS), dtype=k.dtype)
    for j in range(S):
        for d in range(D):
            kt[d, j] = k[b, h, j, d]
    return kt


@numba.njit(cache=True, inline="always")
def _tile_row_times(out, mb, xs, i0, i1, S, T, causal, span, blocks):
    """out[i - i0, :n_i'] += xs[i - i0] @ M[:, :n_i'] for the tile's rows i0 <= i < i1, a key
    block at a time: M blocked as mb (S'/KEYS, D, KEYS), xs (ROWS, D), out (ROWS, S')."""
    for jb in range(blocks):
        for r in range(i0, i1, 4):                                # four rows at a time, to the
            w = min(KEYS, _keys(min(r + 3, i1 - 1), S, T, causal, span) - jb * KEYS)   # last one's keys
            if w > 0:
                _rows_times(out[r - i0:r - i0 + 4], jb * KEYS, xs[r - i0:r - i0 + 4], mb[jb], w)


@numba.njit(cache=True, inline="always")
def _tile_dots(out, x, mt, i0, i1, S, T, causal, span):
    """out[i - i0] += x[i - i0, :n_i'] @ M[:n_i'] for the tile's rows i0 <= i < i1, four at
    a time to the last one's keys: x (ROWS, S'), M^T mt (D, S'), out (ROWS, D)."""
    for r in range(i0, i1, 4):
        w = _keys(min(r + 3, i1 - 1), S, T, causal, span)
        if w > 0:
            _rows_dots(out[r - i0:r - i0 + 4], x[r - i0:r - i0 + 4], mt, w)


@numba.njit(cache=True, inline="always")
def _add_transposed(out, x, w, n):
    """out[:, :n] += x^T @ w[:, :n], four rows of out at a time: out (D', S'), x (ROWS, D'),
    w (ROWS, S'). dK^T and dV^T are summed along the keys (long rows), not dK along D."""
    for d in range(0, out.shape[0], 4):
        _rows_times(out[d:d + 4], 0, x[:, d:d + 4].T, w, n)


@numba.njit(cache=True, error_model="numpy", fastmath=True)
def _forward_head(q, k, v, sc, causal, mask, bias, out, p, b, h):
    """out[b, h] and p[b, h] of one head; sc the scale in q's dtype; mask (1 or B, S) keys
    batch row b may attend to; bias (1 or B, H, T, S) added to the scaled scores (none: 0 rows)."""
    T, D = q.shape[2], q.shape[3]
    S = k.shape[2]
    Sp = (S + KEYS - 1) // KEYS * KEYS
    zero = q.dtype.type(0.0)
    kb, vt = _key_blocks(k, b, h), _key_columns(v, b, h)          # K^T (S'/64, D, 64), V^T (D, S')
    span, holes, keep = _key_mask(mask, b, S, Sp, q.dtype)
    qs = np.zeros((ROWS, D), dtype=q.dtype)                       # scaled query rows of the tile
    o = np.empty((ROWS, D), dtype=q.dtype)
    rows = np.empty((ROWS, Sp), dtype=q.dtype)                    # scores, then exp(scores - max)
    inv = np.empty(ROWS, dtype=q.dtype)                           # 1 / sum of each row's exps
    one = q.dtype.type(1.0)
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
            row = rows[i - i0]
            _prepare_row(row, n, holes, keep)                                  # E = exp(S - max)
            inv[i - i0] = one / _exp_sum(row, n, holes, keep, one, _row_max(row, n)) if n else zero
        o[:] = zero
        _tile_dots(o, rows, vt, i0, i1, S, T, causal, span)                  # O = E V
        for i in range(i0, i1):                                   # P = E / sum, O = E V / sum
            c = inv[i - i0]
            for d in range(D):
                out[b, h, i, d] = o[i - i0, d] * c
            for j in range(S):
                p[b, h, i, j] = rows[i - i0, j] * c


@numba.njit(cache=True, error_model="numpy", fastmath=True)
def _backward_head(dout, q, k, v, p, sc, causal, mask, dq, dk, dv, dbias, b, h):
    """dq[b, h], dk[b, h] and dv[b, h] of one head, and dbias[b, h] (the bias's gradient
    before the sum over batch) unless dbias has 0 rows; sc the scale in q's dtype."""
    T, D = q.shape[2], q.shape[3]
    S = k.shape[2]
    Sp = (S + KEYS - 1) // KEYS * KEYS
    Tp = (T + ROWS - 1) // ROWS * ROWS
    zero = q.dtype.type(0.0)
    vb, kt = _key_blocks(v, b, h), _key_columns(k, b, h)          # V^T (S'/64, D, 64), K^T (D, S')
    span = _key_mask(mask, b, S, Sp, q.dtype)[0]
    Dp = (D + 3) // 4 * 4
    qq = np.zeros((Tp, Dp), dtype=q.dtype)                        # Q (T', D')
    gg = np.zeros((Tp, Dp), dtype=q.dtype)                        # dO (T', D')
    for i in range(T):
        for d in range(D):
            qq[i, d] = q[b, h, i, d]
            gg[i, d] = dout[b, h, i, d]
    dkt = np.zeros((Dp, Sp), dtype=q.dtype)                       # dK^T (D', S')
    dvt = np.zeros((Dp, Sp), dtype=q.dtype)                       # dV^T (D', S')
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
        _tile_row_times(ds, vb, gg[i0:i0 + ROWS, :D], i0, i1, S, T, causal, span, blocks)   # dP = dO V^T
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
        _tile_dots(dqb, ds, kt, i0, i1, S, T, causal, span)                  # dQ = dS K
        for i in range(i0, i1):
            for d in range(D):
                dq[b, h, i, d] = dqb[i - i0, d]
        _add_transposed(dkt, qq[i0:i0 + ROWS], ds, nblock)        # dK^T += Q^T dS
        _add_transposed(dvt, gg[i0:i0 + ROWS], pb, nblock)        # dV^T += dO^T P
    for j in range(S):
        for d in range(D):
            dk[b, h, j, d] = dkt[d, j]
            dv[b, h, j, d] = dvt[d, j]


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


def fused_attention_forward(q, k, v, scale, causal, mask=None, bias=None):
    """q (B,H,T,D), k, v (B,H,S,D), any strides; mask (1 or B, S) bool keys each batch row may
    attend to, or None; bias (1 or B, H, T, S) or None -> out (B,H,T,D), p (B,H,T,S) (zeros
    where masked)."""
    B, H, T, D = q.shape
    out = np.empty((B, H, T, D), dtype=q.dtype)
    p = np.empty((B, H, T, k.shape[2]), dtype=q.dtype)
    mask, bias = _mask_and_bias(mask, bias, k.shape[2], q.dtype)
    _forward_jit(q.dtype)(q, k, v, float(scale), bool(causal), mask, bias, out, p)
    return out, p


def fused_attention_backward(dout, q, k, v, p, scale, causal, mask=None, bias=False, out=None):
    """dout (B,H,T,D), the forward's inputs and p -> dq (B,H,T,D), dk, dv (B,H,S,D) and, when
    the forward had a bias, dbias (B,H,T,S) per batch row (else None). out: (dq, dk, dv)
    arrays to write into (any strides), or None."""
    dq, dk, dv = out if out is not None else (np.empty_like(q), np.empty_like(k), np.empty_like(v))
    dbias = np.empty(p.shape if bias else (0, 1, 1, 1), dtype=q.dtype)
    mask = _mask_and_bias(mask, None, k.shape[2], q.dtype)[0]
    _backward_jit(q.dtype)(dout, q, k, v, p, float(scale), bool(causal), mask, dq, dk, dv, dbias)
    return dq, dk, dv, dbias if bias else None
