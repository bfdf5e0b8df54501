"""Scaled dot-product attention (Vaswani et al. 2017) as BLAS products around a Numba
softmax, the batch cut into parts that run on threads side by side; twins: the whole
attention in one Numba kernel (``minipt.kernels.fused_attention``), and the NumPy op
(``minipt.ops.attention``) under both.

Forward, for batch rows b in a part:
    S = Q K^T (BLAS),  P = softmax(scale S + bias) over the keys a row may see (Numba),
    O = P V (BLAS)
Backward, from the stored P:
    dV = P^T dO,  dP = dO V^T (BLAS),  dS = P (dP - sum_j dP P) (Numba),
    dQ = scale dS K,  dK = scale dS^T Q (BLAS);  dbias = dS per batch row
The row helpers (``_seen``, ``_key_mask``, ``_row_max``, ``_prepare_row``, ``_exp_sum``) serve the fused
kernel too, so the two paths agree on every mask.

Masks and bias (BERT's key padding, T5's relative position bias). A key mask (1 or B, S)
says which keys each batch row may attend to: n_i is also cut after the last allowed key
(trailing padding costs nothing) and a row with no allowed key below n_i is all zeros;
masked keys before that get a score of -1e30 (finite: fastmath assumes no inf) and their
exponential times 0 (``_exp32`` stops at exp(-87)), so p = 0 there exactly. The additive
bias (1 or B, H, T, S) is added to the scaled scores; the backward writes dbias per batch
row (B, H, T, S), and the op sums it over the batch the bias was broadcast along.

Why parts on threads. Each (batch, head) product is small (T x D times D x S): split over
OpenBLAS's two threads it ran at 47 GF/s (QK^T at B 16, H 4, T 128, D 32), on one thread
86 GF/s. So NumPy's BLAS is held at one thread, the batch is cut into as many parts as
there are threads (``threads.in_parts``), and each part runs its products and its
softmax on its own thread. In float32 a part is one ``nogil`` call (``_forward_part``,
``_backward_part``) that calls NumPy's own GEMM and the softmax kernels by address
(``minipt.kernels.calls``): a batch row's P stays in cache from product to softmax to
product, and Python's lock is taken once per part. Whole steps took 0.90-0.98x the time
of the same steps through ``np.matmul``, with the same bits (BERT, GPT, T5 at S, M, L);
float64, and shapes NumPy would not send to GEMM, keep ``np.matmul``. Causal products stop at the
keys a block of rows can see (``ROW_BLOCKS``), 5/8 of the full square. The timings
against the fused kernel and torch are in ``minipt.ops.attention``.
"""
import numba
import numpy as np
from numba.extending import overload

from . import calls, per_dtype, threads
from .gelu import _exp32


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


@numba.njit(cache=True, inline="always")
def _at(a, b, h, r, c):                                        # the address of a[b, h, r, c]
    s = a.strides
    return a.ctypes.data + b * s[0] + h * s[1] + r * s[2] + c * s[3]


@numba.njit(cache=True, inline="always")
def _ld(a):                                                     # row stride of a (B, H, rows, D) array's matrices
    return a.strides[2] // a.itemsize


@numba.njit(cache=True, inline="always")
def _scores(fn, a, m, c, b, h, rows):
    """c[b, h, r0:r1, :n] = a[b, h, r0:r1] m[b, h, :n]^T for each row block (r0, r1, n) of
    rows: S = Q K^T, dP = dO V^T."""
    one, zero = a.dtype.type(1.0), a.dtype.type(0.0)
    for r in range(rows.shape[0]):
        r0, r1, n = rows[r, 0], rows[r, 1], rows[r, 2]
        calls.gemm(fn, calls.NO_TRANS, calls.TRANS, r1 - r0, n, a.shape[3], one, _at(a, b, h, r0, 0), _ld(a),
                   _at(m, b, h, 0, 0), _ld(m), zero, _at(c, b, h, r0, 0), c.shape[3])


@numba.njit(cache=True, inline="always")
def _mix(fn, s, m, c, b, h, rows, alpha):
    """c[b, h, r0:r1] = alpha s[b, h, r0:r1, :n] m[b, h, :n] for each row block: O = P V,
    dQ = sc dS K."""
    zero = s.dtype.type(0.0)
    for r in range(rows.shape[0]):
        r0, r1, n = rows[r, 0], rows[r, 1], rows[r, 2]
        calls.gemm(fn, calls.NO_TRANS, calls.NO_TRANS, r1 - r0, m.shape[3], n, alpha, _at(s, b, h, r0, 0),
                   s.shape[3], _at(m, b, h, 0, 0), _ld(m), zero, _at(c, b, h, r0, 0), _ld(c))


def _forward_part(q, k, v, p, out, sc, causal, mask, bias, b0, b1, rows, fn, softmax):
    """The forward of batch rows b0 .. b1 in one call, through the GEMM at address fn
    (``calls.gemm``): per batch row, S = Q K^T per head and row block (rows (n, 3): first
    row, end row, keys seen), the softmax (``_softmax_jit``'s machine code, at address
    softmax), O = P V. The same products as ``np.matmul`` makes, the same softmax."""
    H = q.shape[1]
    for b in range(b0, b1):
        for h in range(H):
            _scores(fn, q, k, p, b, h, rows)
        calls.call_compiled(softmax, (p[b:b + 1], sc, causal, mask, bias, b))
        for h in range(H):
            _mix(fn, p, v, out, b, h, rows, q.dtype.type(1.0))


def _backward_part(dout, q, k, v, p, ds, dq, dk, dv, sc, causal, mask, b0, b1, rows, keys, fn, backward):
    """The backward of batch rows b0 .. b1 in one call, as ``_forward_part``: dP = dO V^T,
    dS (``_backward_jit``'s machine code at address backward, in ds), dQ = sc dS K per row
    block; dV = P^T dO and dK = sc dS^T Q per key block (keys (n, 3): first key, end key,
    first row that sees them)."""
    H, T, D, S = q.shape[1], q.shape[2], q.shape[3], k.shape[2]
    one, zero = q.dtype.type(1.0), q.dtype.type(0.0)
    for b in range(b0, b1):
        for h in range(H):
            _scores(fn, dout, v, ds, b, h, rows)
        calls.call_compiled(backward, (ds[b:b + 1], p[b:b + 1], causal, mask, b))
        for h in range(H):
            _mix(fn, ds, k, dq, b, h, rows, sc)
            for c in range(keys.shape[0]):
                c0, c1, r0 = keys[c, 0], keys[c, 1], keys[c, 2]
                calls.gemm(fn, calls.TRANS, calls.NO_TRANS, c1 - c0, D, T - r0, one, _at(p, b, h, r0, c0), S,
                           _at(dout, b, h, r0, 0), _ld(dout), zero, _at(dv, b, h, c0, 0), _ld(dv))
                calls.gemm(fn, calls.TRANS, calls.NO_TRANS, c1 - c0, D, T - r0, sc, _at(ds, b, h, r0, c0), S,
                           _at(q, b, h, r0, 0), _ld(q), zero, _at(dk, b, h, c0, 0), _ld(dk))


def _forward_part_signature(t):
    a4, c4, i = t[:, :, :, :], t[:, :, :, ::1], numba.int64
    return numba.void(a4, a4, a4, c4, a4, t, numba.boolean, numba.boolean[:, :], a4, i, i, i[:, ::1], i, i)


def _backward_part_signature(t):
    a4, c4, i = t[:, :, :, :], t[:, :, :, ::1], numba.int64
    return numba.void(a4, a4, a4, a4, c4, c4, a4, a4, a4, t, numba.boolean, numba.boolean[:, :], i, i, i[:, ::1],
                      i[:, ::1], i, i)


_PART_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}
_forward_part_jit = per_dtype(_forward_part, _forward_part_signature, **_PART_OPTIONS)
_backward_part_jit = per_dtype(_backward_part, _backward_part_signature, **_PART_OPTIONS)


def _mask_and_bias(mask, bias, S, dtype):
    """The kernels' forms: mask (1 or B, S) bool (all True for None), bias (1 or B, H, T, S)
    (0 rows for None)."""
    mask = np.ones((1, S), dtype=bool) if mask is None else np.require(mask, requirements="W")
    bias = np.empty((0, 1, 1, 1), dtype=dtype) if bias is None else bias
    return mask, bias


ROW_BLOCKS = 4   # causal products in this many row blocks: 5/8 of the full products' work


def _row_blocks(T, S, causal):
    """[(first row, end row, keys those rows see)]: the causal rule lets query rows i < r1
    see the keys j < r1 + S - T only, so each block's products stop there."""
    if not causal:
        return [(0, T, S)]
    cuts = [T * i // ROW_BLOCKS for i in range(ROW_BLOCKS + 1)]
    return [(r0, r1, min(S, r1 + S - T)) for r0, r1 in zip(cuts, cuts[1:]) if r1 > r0]


def _key_blocks(T, S, causal):
    """[(first key, end key, first row that sees them)]: the transpose of ``_row_blocks``."""
    out, c0 = [], 0
    for r0, r1, n in _row_blocks(T, S, causal):
        if n > c0:
            out.append((c0, n, r0))
            c0 = n
    return out


_addresses: dict = {}


def _address(kernel, signature, dtype) -> int:
    """The address of ``kernel``'s (a ``per_dtype``) machine code for ``dtype``, kept."""
    key = (kernel, dtype)
    if key not in _addresses:
        _addresses[key] = calls.compiled_address(kernel(dtype), signature(numba.from_dtype(dtype)))
    return _addresses[key]


def _gemm_for(dtype, rows, keys, T, D, arrays, pairs) -> int:
    """The address of NumPy's own GEMM (``calls.gemm_address``) when the part kernels, calling
    it directly, make the very calls ``np.matmul`` would, so give the same bits; else 0 (the
    parts then call ``np.matmul``). NumPy's matmul calls GEMM when every dimension of a
    product is at least 2 (else GEMV or its own loop), every matrix has rows of unit stride
    and a whole number of elements apart, at least D (else its own loop), and the two
    factors are not one array and its transpose (else SYRK)."""
    size = np.dtype(dtype).itemsize
    dims = [D] + [d for r0, r1, n in rows for d in (r1 - r0, n)] + [d for c0, c1, r0 in keys for d in (c1 - c0, T - r0)]
    if min(dims) < 2 or any(a.strides[3] != size or a.strides[2] % size or a.strides[2] < D * size for a in arrays):
        return 0
    if any(a.ctypes.data == b.ctypes.data and a.strides == b.strides for a, b in pairs):
        return 0
    return calls.gemm_address(dtype)


def blas_attention_forward(q, k, v, scale, causal, mask=None, bias=None):
    """q (B,H,T,D), k, v (B,H,S,D), any strides; mask (1 or B, S) bool keys each batch row may
    attend to, or None; bias (1 or B, H, T, S) or None -> out (B,H,T,D), p (B,H,T,S). out is
    laid out (B,T,H,D) in memory: the heads come out already concatenated, with no copy."""
    B, H, T, D = q.shape
    S = k.shape[2]
    out = np.empty((B, T, H, D), dtype=q.dtype).transpose(0, 2, 1, 3)
    p = np.empty((B, H, T, S), dtype=q.dtype)
    mask, bias = _mask_and_bias(mask, bias, S, q.dtype)
    blocks = _row_blocks(T, S, causal)
    fn = _gemm_for(q.dtype, blocks, _key_blocks(T, S, causal), T, D, [q, k, v, out], [(q, k)])
    if fn:
        kernel, rows = _forward_part_jit(q.dtype), np.array(blocks, dtype=np.int64)
        softmax = _address(_softmax_jit, _softmax_signature, q.dtype)
        threads.in_parts(lambda b: kernel(q, k, v, p, out, q.dtype.type(scale), bool(causal), mask, bias, b.start,
                                          b.stop, rows, fn, softmax), B)
        return out, p
    softmax = _softmax_jit(q.dtype)

    def part(b):
        for r0, r1, n in blocks:                                  # S = Q K^T
            np.matmul(q[b, :, r0:r1], k[b, :, :n].swapaxes(-1, -2), out=p[b, :, r0:r1, :n])
        softmax(p[b], float(scale), bool(causal), mask, bias, b.start)   # also zeros what no row sees
        for r0, r1, n in blocks:                                  # O = P V
            np.matmul(p[b, :, r0:r1, :n], v[b, :, :n], out=out[b, :, r0:r1])
    threads.in_parts(part, B)
    return out, p


def blas_attention_backward(dout, q, k, v, p, scale, causal, mask=None, bias=False, out=None):
    """dout (B,H,T,D), the forward's inputs and p -> dq (B,H,T,D), dk, dv (B,H,S,D) and, when
    the forward had a bias, dbias (B,H,T,S) per batch row (else None). out: (dq, dk, dv)
    arrays of those shapes, any strides, to write into (views of a fused projection's
    gradient, which then needs no copy), or None."""
    B, H, T, D = q.shape
    S = k.shape[2]
    dq, dk, dv = out if out is not None else (np.empty_like(q), np.empty_like(k), np.empty_like(v))
    ds = np.empty(p.shape, dtype=q.dtype)                         # dP, then dS
    mask = _mask_and_bias(mask, None, S, q.dtype)[0]
    sc = q.dtype.type(scale)
    rows, keys = _row_blocks(T, S, causal), _key_blocks(T, S, causal)
    fn = _gemm_for(q.dtype, rows, keys, T, D, [dout, q, k, v, dq, dk, dv], [(q, k), (dout, v)])
    if fn:
        kernel, r, c = _backward_part_jit(q.dtype), np.array(rows, dtype=np.int64), np.array(keys, dtype=np.int64)
        backward = _address(_backward_jit, _backward_signature, q.dtype)
        threads.in_parts(lambda b: kernel(dout, q, k, v, p, ds, dq, dk, dv, sc, bool(causal), mask, b.start, b.stop,
                                          r, c, fn, backward), B)
        return dq, dk, dv, ds if bias else None
    backward = _backward_jit(q.dtype)

    def part(b):
        for r0, r1, n in rows:                                    # dP = dO V^T
            np.matmul(dout[b, :, r0:r1], v[b, :, :n].swapaxes(-1, -2), out=ds[b, :, r0:r1, :n])
        backward(ds[b], p[b], bool(causal), mask, b.start)        # dS, zeros what no row sees
        for r0, r1, n in rows:                                    # dQ = dS K (scaled below)
            np.matmul(ds[b, :, r0:r1, :n], k[b, :, :n], out=dq[b, :, r0:r1])
        for c0, c1, r0 in keys:                                   # dV = P^T dO, dK = dS^T Q
            np.matmul(p[b, :, r0:, c0:c1].swapaxes(-1, -2), dout[b, :, r0:], out=dv[b, :, c0:c1])
            np.matmul(ds[b, :, r0:, c0:c1].swapaxes(-1, -2), q[b, :, r0:], out=dk[b, :, c0:c1])
        dq[b] *= sc
        dk[b] *= sc
    threads.in_parts(part, B)
    return dq, dk, dv, ds if bias else None
