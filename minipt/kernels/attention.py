"""Scaled dot-product attention (Vaswani et al. 2017) as BLAS products around a Numba
softmax (``minipt.kernels.attention_rows``), the batch cut into parts that run on threads
side by side; twins: the whole attention in one Numba kernel
(``minipt.kernels.fused_attention``), and the NumPy op (``minipt.ops.attention``) under both.

Forward, for batch rows b in a part:
    S = Q K^T (BLAS),  P = softmax(scale S + bias) over the keys a row may see (Numba),
    O = P V (BLAS)
Backward, from the stored P:
    dV = P^T dO,  dP = dO V^T (BLAS),  dS = P (dP - sum_j dP P) (Numba),
    dQ = scale dS K,  dK = scale dS^T Q (BLAS);  dbias = dS per batch row

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

The backward goes one head of one batch row at a time, so that its P (written by the
forward, read back from memory) and its dS (in a buffer of one head, used again for the
next, unless a bias needs the dS of every row) are still in cache when dV = P^T dO and
dK = sc dS^T Q read them down their columns. Products past OpenBLAS's small-matrix
kernels (O = P V, dQ, dV and dK at T 256, D 32) go to the register tiles
(``minipt.kernels.tiles``), which sum in OpenBLAS's order: the same bits. Whole steps
against the previous order with OpenBLAS alone, in alternating rounds in one process (a
noisy host; 6-10 rounds): BERT M 1.02x / L 1.06x, GPT M 1.05x / L 1.02x, T5 M 1.01x /
L 1.03x as fast; the tiles' share, on against off: BERT L 1.047x, T5 L 1.020x.
"""
import numba
import numpy as np

from . import calls, per_dtype, threads, tiles
from .attention_rows import (
    _backward_jit,
    _backward_signature,
    _mask_and_bias,
    _softmax_jit,
    _softmax_signature,
)

# Numba's disk cache checks only this file's date, and the part kernels are compiled with
# code of these files (the tiles inlined, the calls' intrinsics): their hashes, so that a
# change there changes this file too (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"attention_rows.py": "c8c5e41590ab0410", "calls.py": "7c924b4ecd3fa4b0", "tiles.py": "d3007b221c7530ce"}


@numba.njit(cache=True, inline="always")
def _at(a, b, h, r, c):                                        # the address of a[b, h, r, c]
    s = a.strides
    return a.ctypes.data + b * s[0] + h * s[1] + r * s[2] + c * s[3]


@numba.njit(cache=True, inline="always")
def _ld(a):                                                     # row stride of a (B, H, rows, D) array's matrices
    return a.strides[2] // a.itemsize


@numba.njit(cache=True, inline="always")
def _scores(fn, a, m, c, b, h, cb, ch, rows):
    """c[cb, ch, r0:r1, :n] = a[b, h, r0:r1] m[b, h, :n]^T for each row block (r0, r1, n) of
    rows: S = Q K^T, dP = dO V^T."""
    one, zero = a.dtype.type(1.0), a.dtype.type(0.0)
    for r in range(rows.shape[0]):
        r0, r1, n = rows[r, 0], rows[r, 1], rows[r, 2]
        calls.gemm(fn, calls.NO_TRANS, calls.TRANS, r1 - r0, n, a.shape[3], one, _at(a, b, h, r0, 0), _ld(a),
                   _at(m, b, h, 0, 0), _ld(m), zero, _at(c, cb, ch, r0, 0), c.shape[3])


@numba.njit(cache=True, inline="always")
def _product(fn, tab, trans_a, m, n, k, alpha, a, lda, b, ldb, c, ldc):
    """C (m, n) = alpha op(A) B, A stored with leading dimension lda and op(A) = A or A^T
    (``trans_a``), float32, on the tiles (``tiles.product``) where they take it, else OpenBLAS."""
    if tiles.fits(tab, m, n, k):
        sai, sak = (lda, 1) if trans_a == calls.NO_TRANS else (1, lda)
        tiles.product(tab, m, n, k, alpha, a, sai, sak, b, ldb, c, ldc)
    else:
        calls.gemm(fn, trans_a, calls.NO_TRANS, m, n, k, alpha, a, lda, b, ldb, np.float32(0.0), c, ldc)


@numba.njit(cache=True, inline="always")
def _mix(fn, tab, s, m, c, b, h, sb, sh, rows, alpha):
    """c[b, h, r0:r1] = alpha s[sb, sh, r0:r1, :n] m[b, h, :n] for each row block: O = P V,
    dQ = sc dS K."""
    for r in range(rows.shape[0]):
        r0, r1, n = rows[r, 0], rows[r, 1], rows[r, 2]
        _product(fn, tab, calls.NO_TRANS, r1 - r0, m.shape[3], n, alpha, _at(s, sb, sh, r0, 0), s.shape[3],
                 _at(m, b, h, 0, 0), _ld(m), _at(c, b, h, r0, 0), _ld(c))


@numba.njit(cache=True, inline="always")
def _gather(fn, tab, s, m, c, b, h, sb, sh, keys, T, alpha):
    """c[b, h, c0:c1] = alpha s[sb, sh, r0:, c0:c1]^T m[b, h, r0:] for each key block (c0,
    c1, r0): dV = P^T dO, dK = sc dS^T Q."""
    for kb in range(keys.shape[0]):
        c0, c1, r0 = keys[kb, 0], keys[kb, 1], keys[kb, 2]
        _product(fn, tab, calls.TRANS, c1 - c0, m.shape[3], T - r0, alpha, _at(s, sb, sh, r0, c0), s.shape[3],
                 _at(m, b, h, r0, 0), _ld(m), _at(c, b, h, c0, 0), _ld(c))


def _forward_part(q, k, v, p, out, sc, causal, mask, bias, b0, b1, rows, fn, tab, softmax):
    """The forward of batch rows b0 .. b1 in one call, through the GEMM at address fn
    (``calls.gemm``) and the tiles (``tab``, ``minipt.kernels.tiles``): per batch row,
    S = Q K^T per head and row block (rows (n, 3): first row, end row, keys seen), the
    softmax (``_softmax_jit``'s machine code, at address softmax), O = P V. The bits of
    the products ``np.matmul`` makes, and the same softmax."""
    H = q.shape[1]
    for b in range(b0, b1):
        for h in range(H):
            _scores(fn, q, k, p, b, h, b, h, rows)
        calls.call_compiled(softmax, (p[b:b + 1], sc, causal, mask, bias, b))
        for h in range(H):
            _mix(fn, tab, p, v, out, b, h, b, h, rows, q.dtype.type(1.0))


def _backward_part(dout, q, k, v, p, ds, dq, dk, dv, sc, causal, mask, b0, b1, rows, keys, fn, tab, backward):
    """The backward of batch rows b0 .. b1 in one call, as ``_forward_part``, one head of one
    batch row at a time, so that its P and dS are still in cache for the products that read
    them down their columns: dP = dO V^T, dS (``_backward_jit``'s machine code at address
    backward), dQ = sc dS K per row block; dV = P^T dO and dK = sc dS^T Q per key block
    (keys (n, 3): first key, end key, first row that sees them). dS goes to ds (B, H, T, S)
    when it has rows (a bias's gradient needs them all), else to one head's buffer."""
    H, T = q.shape[1], q.shape[2]
    full = ds.shape[0] > 0
    work = ds if full else np.empty((1, 1, T, p.shape[3]), dtype=q.dtype)
    for b in range(b0, b1):
        for h in range(H):
            sb, sh = (b, h) if full else (0, 0)
            _scores(fn, dout, v, work, b, h, sb, sh, rows)
            calls.call_compiled(backward, (work[sb:sb + 1, sh:sh + 1], p[b:b + 1, h:h + 1], causal, mask, b))
            _mix(fn, tab, work, k, dq, b, h, sb, sh, rows, sc)
            _gather(fn, tab, p, dout, dv, b, h, b, h, keys, T, q.dtype.type(1.0))
            _gather(fn, tab, work, q, dk, b, h, sb, sh, keys, T, sc)


def _forward_part_signature(t):
    a4, c4, i = t[:, :, :, :], t[:, :, :, ::1], numba.int64
    return numba.void(a4, a4, a4, c4, a4, t, numba.boolean, numba.boolean[:, :], a4, i, i, i[:, ::1], i, i[::1], i)


def _backward_part_signature(t):
    a4, c4, i = t[:, :, :, :], t[:, :, :, ::1], numba.int64
    return numba.void(a4, a4, a4, a4, c4, c4, a4, a4, a4, t, numba.boolean, numba.boolean[:, :], i, i, i[:, ::1],
                      i[:, ::1], i, i[::1], i)


_PART_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}
_forward_part_jit = per_dtype(_forward_part, _forward_part_signature, **_PART_OPTIONS)
_backward_part_jit = per_dtype(_backward_part, _backward_part_signature, **_PART_OPTIONS)


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


_BLOCKS: dict = {}


def _blocks(T, S, causal):
    """``_row_blocks`` and ``_key_blocks`` of (T, S, causal), each as a list and as an int64
    array (n, 3) for the part kernels, and the smallest dimension of their products; made
    once per shape (a GPT S step asks 4 times, and cProfile saw 0.1 ms of these lines)."""
    key = (T, S, causal)
    found = _BLOCKS.get(key)
    if found is None:
        rows, keys = _row_blocks(T, S, causal), _key_blocks(T, S, causal)
        least = min([d for r0, r1, n in rows for d in (r1 - r0, n)] + [d for c0, c1, r0 in keys for d in (c1 - c0, T - r0)])
        found = _BLOCKS[key] = (rows, keys, np.array(rows, dtype=np.int64), np.array(keys, dtype=np.int64), least)
    return found


def _gemm_for(dtype, least, D, arrays, pairs) -> int:
    """The address of NumPy's own GEMM (``calls.gemm_address``) when the part kernels, calling
    it directly, make the very calls ``np.matmul`` would, so give the same bits; else 0 (the
    parts then call ``np.matmul``). NumPy's matmul calls GEMM when every dimension of a
    product is at least 2 (else GEMV or its own loop: ``least`` is the smallest but D),
    every matrix has rows of unit stride and a whole number of elements apart, at least D
    (else its own loop), and the two factors are not one array and its transpose (else SYRK)."""
    size = np.dtype(dtype).itemsize
    if min(least, D) < 2:
        return 0
    for a in arrays:
        row = a.strides[2]
        if a.strides[3] != size or row % size or row < D * size:
            return 0
    for a, b in pairs:                  # the data addresses compared without ndarray.ctypes' Python object
        if a.strides == b.strides and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]:
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
    blocks, _, rows, _, least = _blocks(T, S, causal)
    fn = _gemm_for(q.dtype, least, D, (q, k, v, out), ((q, k),))
    if fn:
        kernel, tab = _forward_part_jit(q.dtype), tiles.table()
        softmax = _address(_softmax_jit, _softmax_signature, q.dtype)
        threads.in_parts(lambda b: kernel(q, k, v, p, out, q.dtype.type(scale), bool(causal), mask, bias, b.start,
                                          b.stop, rows, fn, tab, softmax), B)
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
    mask = _mask_and_bias(mask, None, S, q.dtype)[0]
    sc = q.dtype.type(scale)
    rows, keys, r, c, least = _blocks(T, S, causal)
    fn = _gemm_for(q.dtype, least, D, (dout, q, k, v, dq, dk, dv), ((q, k), (dout, v)))
    if fn:
        kernel = _backward_part_jit(q.dtype)
        backward = _address(_backward_jit, _backward_signature, q.dtype)
        ds = np.empty(p.shape if bias else (0, *p.shape[1:]), dtype=q.dtype)   # no bias: one head's dS at a time
        tab = tiles.table()
        threads.in_parts(lambda b: kernel(dout, q, k, v, p, ds, dq, dk, dv, sc, bool(causal), mask, b.start, b.stop,
                                          r, c, fn, tab, backward), B)
        return dq, dk, dv, ds if bias else None
    backward = _backward_jit(q.dtype)
    ds = np.empty(p.shape, dtype=q.dtype)                         # dP, then dS

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
