"""Attention's rows: the masked, scaled softmax of each row of scores, forward and backward,
as Numba kernels over (B', H, T, S), and the row helpers they are made of. The BLAS route
(``minipt.kernels.attention``) calls the kernels between its products; the fused kernel
(``minipt.kernels.fused_attention``) inlines the helpers (``_seen``, ``_key_mask``,
``_row_max``, ``_prepare_row``, ``_exp_sum``), so the two agree on every mask.

    P = softmax(scale S + bias) over the keys a row may see,
    dS = P (dP - sum_j dP P)                                   (before the scale)

Masks and bias (BERT's key padding, T5's relative position bias). A key mask (1 or B, S)
says which keys each batch row may attend to: n_i is also cut after the last allowed key
(trailing padding costs nothing) and a row with no allowed key below n_i is all zeros;
masked keys before that get a score of -1e30 (finite: fastmath assumes no inf) and their
exponential times 0 (``_exp32`` stops at exp(-87)), so p = 0 there exactly. The additive
bias (1 or B, H, T, S) is added to the scaled scores; the backward writes dbias per batch
row (B, H, T, S), and the op sums it over the batch the bias was broadcast along.
"""
import numba
import numpy as np
from numba.extending import overload

from . import per_dtype
from .gelu import _exp32

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"gelu.py": "abdd7eb1a7e88395"}


def _exp(x):
    return np.exp(x)


@overload(_exp, inline="always")
def _exp_impl(x):
    if x == numba.types.float32:
        return lambda x: _exp32(x)
    return lambda x: np.exp(x)


@numba.njit(cache=True, inline="always")
def _seen(i, S, T, causal, span):
    """Keys 0 <= j < n query row i looks at: the causal limit, cut at span = (first, last + 1)
    of the keys its batch row may attend to; 0 when none of them is in reach."""
    n = min(i + S - T + 1 if causal else S, span[1])
    return n if span[0] < n else 0


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


def _row_max(row, n):
    """max of row[:n] (n >= 1) of a contiguous row. LLVM here does not vectorise a float
    max (its max-reduction wants a "no NaNs" mark on the function, which Numba does not
    set; eight running maxima by hand stayed scalar too, 0.62 ms for the 12,288 rows of
    B 8, H 6, T 256), but it does an integer one: the float's bits b, made to order as
    the floats do (b, or b ^ 0x7fff... when the sign bit is set), in an integer max, then
    turned back: 0.30 ms for those rows. The softmax kernel at that shape (one thread)
    took 2.16-2.17 ms against 2.37 before, and since a max is exact every result keeps
    its bits (tests/kernels/test_row_max.py; 114 arrays of attention, cross-entropy and
    five training steps compared with the old kernel, all equal)."""
    return max(row[:n])


@overload(_row_max, inline="always")
def _row_max_impl(row, n):
    if row.dtype == numba.types.float32:
        return lambda row, n: np.int32(_key_max32(row.view(np.int32), n)).view(np.float32)
    return lambda row, n: np.int64(_key_max64(row.view(np.int64), n)).view(np.float64)


# The largest float among bits[:n], as its bits. One function per width with its types
# spelled out: a generic one (bits.dtype.type casts) stayed scalar.
@numba.njit(cache=True, inline="always")
def _key_max32(bits, n):
    flip, zero, m = np.int32(0x7FFFFFFF), np.int32(0), np.int32(-2147483648)
    for j in range(n):
        b = bits[j]
        m = max(m, np.int32(b ^ flip) if b < zero else b)
    return np.int32(m ^ (flip * np.int32(m < zero)))


@numba.njit(cache=True, inline="always")
def _key_max64(bits, n):
    flip, zero, m = np.int64(0x7FFFFFFFFFFFFFFF), np.int64(0), np.int64(-9223372036854775807 - 1)
    for j in range(n):
        b = bits[j]
        m = max(m, np.int64(b ^ flip) if b < zero else b)
    return np.int64(m ^ (flip * np.int64(m < zero)))


@numba.njit(cache=True, inline="always", fastmath=True)
def _prepare_row(row, n, holes, keep):
    """Before the exponentials: row[:n] <- -1e30 at the masked keys (keep = 0), row[n:] <- 0."""
    zero = row.dtype.type(0.0)
    if holes:
        low = row.dtype.type(-1e30)                                  # finite: fastmath assumes no inf
        for j in range(n):
            row[j] = row[j] if keep[j] != zero else low
    row[n:] = zero


@numba.njit(cache=True, inline="always", fastmath=True)
def _exp_sum(row, n, holes, keep, sc, m):
    """row[:n] <- exp(sc (row[:n] - m)) over the keys with keep = 1 (the others get 0);
    returns the sum (the caller scales P and O by its inverse). m is the row's max
    (``_row_max``) and sc > 0 the scale of raw scores (1 for scores already scaled): no
    pass of its own. The caller passes ``_row_max(row, n)`` itself: with that call nested
    in here (an inlined helper inlining another), the loop ran 1.3x slower (B 4, H 6,
    T 256; the same bits either way)."""
    total = row.dtype.type(0.0)
    for j in range(n):
        e = _exp((row[j] - m) * sc)
        if holes:
            e *= keep[j]                                             # _exp32 stops at exp(-87), not 0
        row[j] = e
        total += e
    return total


def _softmax(s, sc, causal, mask, bias, b0):
    """s (B', H, T, S) raw scores of batch rows b0 .. b0 + B' - 1, overwritten with P; mask
    (1 or B, S) keys each batch row may attend to; bias (1 or B, H, T, S) or 0 rows."""
    Bp, H, T, S = s.shape
    one, zero = s.dtype.type(1.0), s.dtype.type(0.0)
    for bb in range(Bp):
        b = b0 + bb
        span, holes, keep = _key_mask(mask, b, S, S, s.dtype)
        for h in range(H):
            for i in range(T):
                row = s[bb, h, i]
                n = _seen(i, S, T, causal, span)
                scale = sc
                if bias.shape[0] > 0:
                    bi = bias[b if bias.shape[0] > 1 else 0, h, i]
                    for j in range(n):
                        row[j] = row[j] * sc + bi[j]
                    scale = one
                _prepare_row(row, n, holes, keep)                 # masked keys low, 0 past n
                c = one / _exp_sum(row, n, holes, keep, scale, _row_max(row, n)) if n else zero   # exp(scale (row - max))
                for j in range(n):
                    row[j] *= c


def _softmax_backward(dp, p, causal, mask, b0):
    """dp (B', H, T, S) = dO V^T of batch rows b0 .., overwritten with dS = P (dP - sum_j dP P)
    (before the scale); 0 where P is 0 and past the keys a row sees."""
    Bp, H, T, S = p.shape
    zero = p.dtype.type(0.0)
    for bb in range(Bp):
        span = _key_mask(mask, b0 + bb, S, S, p.dtype)[0]
        for h in range(H):
            for i in range(T):
                g, y = dp[bb, h, i], p[bb, h, i]
                n = _seen(i, S, T, causal, span)
                dot = zero
                for j in range(n):
                    dot += g[j] * y[j]
                for j in range(n):
                    g[j] = y[j] * (g[j] - dot)
                for j in range(n, S):
                    g[j] = zero


def _softmax_signature(t):
    c4, a4 = t[:, :, :, ::1], t[:, :, :, :]
    return numba.void(c4, t, numba.boolean, numba.boolean[:, :], a4, numba.int64)


def _backward_signature(t):
    c4 = t[:, :, :, ::1]
    return numba.void(c4, c4, numba.boolean, numba.boolean[:, :], numba.int64)


_OPTIONS = {"cache": True, "nogil": True, "fastmath": True, "error_model": "numpy"}
_softmax_jit = per_dtype(_softmax, _softmax_signature, **_OPTIONS)
_backward_jit = per_dtype(_softmax_backward, _backward_signature, **_OPTIONS)


def _mask_and_bias(mask, bias, S, dtype):
    """The kernels' forms: mask (1 or B, S) bool (all True for None), bias (1 or B, H, T, S)
    (0 rows for None)."""
    mask = np.ones((1, S), dtype=bool) if mask is None else np.require(mask, requirements="W")
    bias = np.empty((0, 1, 1, 1), dtype=dtype) if bias is None else bias
    return mask, bias
