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
loop), other strides, another dtype, or one array twice (NumPy's SYRK): ``_matches``.

Why: at size S, two parts of a stack's batch run side by side on two threads and take
Python's lock in turn (benchmarks/bench_lock.py: a hand-over took 34 us here). Through
``@`` a linear's backward let go of the lock and took it back three times, its forward
twice (the bias add is a NumPy call too); a product of a few microseconds then waited
for the other thread's Python. In one call each, with the same bits, GPT S steps took
0.916x the time and BERT S steps 0.930x (medians of 6 pairs of processes, 20 steps each,
the two codes alternating in turn; 0.88-0.95x); GPT M, BERT M and T5 S steps 0.96-1.06x,
GPT L and BERT L 0.97-1.03x (benchmarks/README.md).
"""
import numba
import numpy as np

from . import calls

# Numba's disk cache checks only this file's date; this file's code is compiled into its
# kernels, so its hash is kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"calls.py": "7c924b4ecd3fa4b0"}


_BLAS: list = []                                          # [(GEMM, GEMV)] once looked up


def _addresses() -> tuple[int, int]:
    """The addresses of NumPy's float32 GEMM and GEMV, (0, 0) when either is missing."""
    if not _BLAS:
        gemm, gemv = calls.gemm_address(np.float32), calls.gemv_address(np.float32)
        _BLAS.append((gemm, gemv) if gemm and gemv else (0, 0))
    return _BLAS[0]


def linear_forward(x2: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray | None:
    """x2 (N, C_in), w (C_out, C_in), b (C_out,) or None -> y = x2 w^T + b (N, C_out), or
    None where ``x2 @ w.T`` would not make the GEMM call made here (not float32, not
    C-ordered, a dimension under 2, x2 being w: ``_matches``)."""
    gemm = _addresses()[0]
    if not gemm or x2.dtype != np.float32 or w.dtype != np.float32:
        return None
    ok, y = _forward(gemm, x2, w, b)
    return y if ok else None


def linear_backward(dy2: np.ndarray, w: np.ndarray, x2: np.ndarray, has_bias: bool):
    """dy2 (N, C_out), w (C_out, C_in), x2 (N, C_in) -> dx (N, C_in), dw (C_out, C_in), db
    (C_out,) or None; or None where NumPy's ``@`` would make other calls (``_matches``)."""
    gemm, gemv = _addresses()
    if not gemm or dy2.dtype != np.float32 or w.dtype != np.float32 or x2.dtype != np.float32:
        return None
    ok, dx, dw, db = _backward(gemm, gemv, dy2, w, x2, has_bias)
    return (dx, dw, db if has_bias else None) if ok else None


@numba.njit(cache=True, inline="always")
def _c_ordered(a):
    """A 2-D array with rows of unit stride lying one after the other, both dimensions >= 2."""
    return a.shape[0] >= 2 and a.shape[1] >= 2 and a.strides[1] == a.itemsize and \
        a.strides[0] == a.shape[1] * a.itemsize


@numba.njit(cache=True, inline="always")
def _matches(a, b, shared):
    """NumPy's matmul of A and B (either one transposed) calls GEMM as done here: both
    C-ordered with every dimension at least 2, and not one array with itself when
    ``shared`` (the product would be A A^T, for which it calls SYRK)."""
    return _c_ordered(a) and _c_ordered(b) and not (shared and a.ctypes.data == b.ctypes.data)


@numba.njit(cache=True, nogil=True)
def _forward(gemm, x2, w, b):
    """``linear_forward`` on float32: -> (True, y) or (False, an empty array)."""
    N, C_in = x2.shape
    C_out = w.shape[0]
    if not _matches(x2, w, N == C_out):
        return False, np.empty((0, 0), dtype=np.float32)
    y = np.empty((N, C_out), dtype=np.float32)            # (N, C_out)
    calls.gemm(gemm, calls.NO_TRANS, calls.TRANS, N, C_out, C_in, np.float32(1.0), x2.ctypes.data, C_in,
               w.ctypes.data, C_in, np.float32(0.0), y.ctypes.data, C_out)
    if b is not None:
        for n in range(N):
            for j in range(C_out):
                y[n, j] += b[j]
    return True, y


@numba.njit(cache=True, nogil=True)
def _backward(gemm, gemv, dy2, w, x2, has_bias):
    """``linear_backward`` on float32: -> (True, dx, dw, db) (db zeros, unused, without a
    bias) or (False, three empty arrays)."""
    N, C_out = dy2.shape
    C_in = w.shape[1]
    if not (_matches(dy2, w, False) and _matches(dy2, x2, C_out == C_in)):
        empty = np.empty((0, 0), dtype=np.float32)
        return False, empty, empty, np.empty(0, dtype=np.float32)
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
    return True, dx, dw, db
