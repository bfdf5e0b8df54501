"""The affine layer y = x W^T + b, forward and backward, each in one Numba call that lets
go of Python's lock once; twin: the NumPy lines of ``minipt.ops.linear``.

    forward:   y = x W^T (GEMM), then y += b                  x (N, C_in), W (C_out, C_in)
    backward:  dx = dy W,  dW = dy^T x (GEMMs),  db = 1^T dy (GEMV, 1 a vector of N ones)

Each product is the call NumPy's ``@`` itself makes (numpy/_core/src/umath/matmul.c.src,
NumPy 2) to the same OpenBLAS (``calls.gemm``, ``calls.gemv``): for C-ordered float32
operands with every dimension at least 2, ``x @ W.T`` is sgemm(row major, no transpose,
transpose), ``dy @ W`` sgemm(no transpose, no transpose), ``dy.T @ x`` sgemm(transpose,
no transpose), and ``ones @ dy`` sgemv(row major, transpose) on dy as an (N, C_out)
matrix. So the results are NumPy's bits (tests/kernels/test_linear_kernel.py). The op
keeps to ``@`` where NumPy would do something else: a dimension of 1 (GEMV or its own
loop), other strides, another dtype, or one array twice (NumPy's SYRK: ``blas_ready``).

Why: at size S, two parts of a stack's batch run side by side on two threads and take
Python's lock in turn (benchmarks/bench_lock.py: a hand-over took 34 us here). Through
``@`` a linear's backward let go of the lock and took it back three times, its forward
twice (the bias add is a NumPy call too); a product of a few microseconds then waited
for the other thread's Python. In one call each, with the same bits, GPT S and BERT S
steps took 0.94x the time (medians of 7 pairs of processes, 20 steps each, the two
codes alternating; 0.86-1.09x), GPT M, BERT M and T5 S steps the same (0.96-1.06x).
"""
import numba
import numpy as np

from . import calls

# Numba's disk cache checks only this file's date; this file's code is compiled into its
# kernels, so its hash is kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {'calls.py': '12a75c8f978b3437'}


def blas_ready(x2: np.ndarray, w: np.ndarray, other: np.ndarray | None = None) -> bool:
    """Whether the kernels here make the calls ``@`` makes for these operands: float32,
    C-ordered, every dimension at least 2, NumPy's GEMM found, and no product of an array
    with itself (``x2`` and ``w`` in the forward, ``other`` = dy and x2 in the backward:
    NumPy's SYRK case)."""
    if x2.dtype != np.float32 or w.dtype != np.float32 or not (x2.flags.c_contiguous and w.flags.c_contiguous):
        return False
    if min(x2.shape[0], x2.shape[1], w.shape[0]) < 2 or not calls.gemm_address(np.float32):
        return False
    if other is None:
        return x2.shape[0] != w.shape[0] or _data(x2) != _data(w)
    return (other.dtype == np.float32 and other.flags.c_contiguous and calls.gemv_address(np.float32) != 0
            and (w.shape[0] != w.shape[1] or _data(other) != _data(x2)))


def _data(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@numba.njit(cache=True, nogil=True)
def linear_forward(gemm, x2, w, b):
    """x2 (N, C_in), w (C_out, C_in), b (C_out,) or None, float32 -> y (N, C_out);
    ``gemm``: ``calls.gemm_address(np.float32)``."""
    N, C_in = x2.shape
    C_out = w.shape[0]
    y = np.empty((N, C_out), dtype=np.float32)            # (N, C_out)
    calls.gemm(gemm, calls.NO_TRANS, calls.TRANS, N, C_out, C_in, np.float32(1.0), x2.ctypes.data, C_in,
               w.ctypes.data, C_in, np.float32(0.0), y.ctypes.data, C_out)
    if b is not None:
        for n in range(N):
            for j in range(C_out):
                y[n, j] += b[j]
    return y


@numba.njit(cache=True, nogil=True)
def linear_backward(gemm, gemv, dy2, w, x2, has_bias):
    """dy2 (N, C_out), w (C_out, C_in), x2 (N, C_in), float32 -> dx (N, C_in), dw (C_out,
    C_in), db (C_out,) (zeros, unused, without a bias); ``gemm``, ``gemv``: the addresses
    of NumPy's float32 GEMM and GEMV."""
    N, C_out = dy2.shape
    C_in = w.shape[1]
    one, zero = np.float32(1.0), np.float32(0.0)
    dx = np.empty((N, C_in), dtype=np.float32)            # (N, C_in)
    calls.gemm(gemm, calls.NO_TRANS, calls.NO_TRANS, N, C_in, C_out, one, dy2.ctypes.data, C_out,
               w.ctypes.data, C_in, zero, dx.ctypes.data, C_in)
    dw = np.empty((C_out, C_in), dtype=np.float32)        # (C_out, C_in)
    calls.gemm(gemm, calls.TRANS, calls.NO_TRANS, C_out, C_in, N, one, dy2.ctypes.data, C_out,
               x2.ctypes.data, C_in, zero, dw.ctypes.data, C_in)
    db = np.zeros(C_out, dtype=np.float32)                # (C_out,)
    if has_bias:
        ones = np.ones(N, dtype=np.float32)               # (N,)
        calls.gemv(gemv, calls.TRANS, N, C_out, one, dy2.ctypes.data, C_out, ones.ctypes.data, 1,
                   zero, db.ctypes.data, 1)
    return dx, dw, db
