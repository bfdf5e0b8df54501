"""LayerNorm (Ba, Kiros & Hinton 2016, "Layer Normalization") and RMSNorm (Zhang &
Sennrich 2019, "Root Mean Square Layer Normalization"; T5's and LLaMA's norm) forward and
backward as fused Numba loops over rows; twins: ``layer_norm_forward_numpy`` /
``_backward_numpy`` and ``rms_norm_forward_numpy`` / ``_backward_numpy`` in
``minipt.ops.norms``. RMSNorm is LayerNorm without the mean and the bias:
    r = 1 / sqrt(sum(x^2) / C + eps),  y = x r g;   xhat = x r,  dxhat = dy * g,
    dx = r (dxhat - xhat * mean(dxhat * xhat)),  dg = sum_n dy * xhat.
At T5 L's rows (2048 x 192) the NumPy twin's five passes took a T5 step's norms to 54 ms
against torch's 35 (benchmarks/bench_t5.py's per-part table).

Forward, per row n:   mean = sum(x) / C,  rstd = 1 / sqrt(sum((x - mean)^2) / C + eps),
                      y = (x - mean) * rstd * g + b.
Backward, per row:    xhat = (x - mean) * rstd,  dxhat = dy * g,
                      dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
and over all rows:    dg = sum_n dy * xhat,  db = sum_n dy   (in the same pass as dx).

Row sums and the dg/db column sums accumulate in float64 whatever the input dtype; the
element-wise lines run in the input dtype, so float32 stays float32. ``fastmath`` is
limited to reassociation and FMA contraction: it lets LLVM vectorise the sums and keeps
inf/NaN semantics. ``error_model="numpy"`` drops Python's division-by-zero check, which
would otherwise stop LLVM from vectorising any loop with a division.

Serial, not ``prange``: with Numba's workqueue threads (the layer minipt used when measured)
the serial loop was faster than a ``prange`` one at every size measured on 2 cores,
N up to 4096 rows and C up to 768 (3.7x at 1024 x 64, 1.1x at 4096 x 768). ``nogil``: with
the stacks' batch in parts (minipt.nn.batch_parts) each part's norms run on its own thread,
and a kernel holding Python's lock would make the two parts take turns.

Each row first asks for the rows 4 KiB on (``prefetch.py``): in a training step a
backward reads the input its forward saved long before, out of cache by then, and the
forward writes rows no step has touched lately. In BERT M steps (two parts,
benchmarks/kernels_in_step.py) the caller's thread spent 2.57 ms a step in these kernels
against 3.33 without the hints; the values are the same bits.
"""
import numba
import numpy as np

from .prefetch import read_ahead, write_ahead

# Numba's disk cache checks only this file's date; this file's code is compiled into its
# kernels, so its hash is kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"prefetch.py": "90f74125a24a6dd9"}
FASTMATH = {"reassoc", "contract"}


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
def layer_norm_forward(x, g, b, eps):
    """x (N, C), g (C,), b (C,), eps float -> y (N, C), mean (N,), rstd (N,)."""
    N, C = x.shape
    y = np.empty_like(x)                                  # (N, C)
    mean = np.empty(N, dtype=x.dtype)                     # (N,)
    rstd = np.empty(N, dtype=x.dtype)                     # (N,)
    for n in range(N):
        read_ahead(x[n])                                  # rows on, out of cache by now (prefetch.py)
        write_ahead(y[n])
        s = 0.0                                           # float64
        for c in range(C):
            s += x[n, c]
        m = s / C
        v = 0.0                                           # float64, two-pass variance
        for c in range(C):
            d = x[n, c] - m
            v += d * d
        mean[n] = m
        rstd[n] = 1.0 / np.sqrt(v / C + eps)
        m_t, r_t = mean[n], rstd[n]                       # in x's dtype
        for c in range(C):
            y[n, c] = (x[n, c] - m_t) * r_t * g[c] + b[c]
    return y, mean, rstd


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
def layer_norm_backward(dy, x, mean, rstd, g):
    """dy, x (N, C), mean, rstd (N,), g (C,) -> dx (N, C), dg (C,), db (C,)."""
    N, C = x.shape
    dx = np.empty_like(x)                                 # (N, C)
    dg_sum = np.zeros(C)                                  # (C,) float64
    db_sum = np.zeros(C)                                  # (C,) float64
    for n in range(N):
        read_ahead(dy[n])                                 # rows on, out of cache by now (prefetch.py)
        read_ahead(x[n])
        write_ahead(dx[n])
        m, r = mean[n], rstd[n]
        a = 0.0                                           # sum(dxhat), float64
        q = 0.0                                           # sum(dxhat * xhat), float64
        for c in range(C):
            xh = (x[n, c] - m) * r
            dxh = dy[n, c] * g[c]
            a += dxh
            q += dxh * xh
            dg_sum[c] += dy[n, c] * xh
            db_sum[c] += dy[n, c]
        a_t, q_t = x.dtype.type(a / C), x.dtype.type(q / C)
        for c in range(C):
            xh = (x[n, c] - m) * r
            dx[n, c] = r * (dy[n, c] * g[c] - a_t - xh * q_t)
    return dx, dg_sum.astype(x.dtype), db_sum.astype(x.dtype)


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
def rms_norm_forward(x, g, eps):
    """x (N, C), g (C,), eps float -> y (N, C), r (N,)."""
    N, C = x.shape
    y = np.empty_like(x)                                  # (N, C)
    r = np.empty(N, dtype=x.dtype)                        # (N,)
    for n in range(N):
        read_ahead(x[n])                                  # rows on, out of cache by now (prefetch.py)
        write_ahead(y[n])
        s = 0.0                                           # float64
        for c in range(C):
            s += x[n, c] * x[n, c]
        r[n] = 1.0 / np.sqrt(s / C + eps)
        r_t = r[n]                                        # in x's dtype
        for c in range(C):
            y[n, c] = x[n, c] * r_t * g[c]
    return y, r


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
def rms_norm_backward(dy, x, r, g):
    """dy, x (N, C), r (N,), g (C,) -> dx (N, C), dg (C,)."""
    N, C = x.shape
    dx = np.empty_like(x)                                 # (N, C)
    dg_sum = np.zeros(C)                                  # (C,) float64
    for n in range(N):
        read_ahead(dy[n])                                 # rows on, out of cache by now (prefetch.py)
        read_ahead(x[n])
        write_ahead(dx[n])
        rn = r[n]
        q = 0.0                                           # sum(dxhat * xhat), float64
        for c in range(C):
            xh = x[n, c] * rn
            q += dy[n, c] * g[c] * xh
            dg_sum[c] += dy[n, c] * xh
        q_t = x.dtype.type(q / C)
        for c in range(C):
            dx[n, c] = rn * (dy[n, c] * g[c] - x[n, c] * rn * q_t)
    return dx, dg_sum.astype(x.dtype)
