"""LayerNorm forward and backward fused into one pass per row (Ba et al. 2016).
Row statistics accumulate in float64 whatever the input dtype; outputs keep it."""
import numba
import numpy as np

from . import by_size, serial_and_parallel


def _forward(x, g, b, eps):
    """x (N, C), g (C,), b (C,) -> y (N, C), mean (N,), rstd (N,)."""
    N, C = x.shape
    y = np.empty_like(x)
    mean = np.empty(N, dtype=x.dtype)
    rstd = np.empty(N, dtype=x.dtype)
    for n in numba.prange(N):
        s = 0.0
        for c in range(C):
            s += x[n, c]
        m = s / C
        v = 0.0
        for c in range(C):
            d = x[n, c] - m
            v += d * d
        r = 1.0 / np.sqrt(v / C + eps)
        mean[n] = m
        rstd[n] = r
        for c in range(C):
            y[n, c] = (x[n, c] - m) * r * g[c] + b[c]
    return y, mean, rstd


def _dx(dy, x, mean, rstd, g, dx):
    N, C = x.shape
    for n in numba.prange(N):
        m, r = mean[n], rstd[n]
        a = 0.0   # sum dxhat
        p = 0.0   # sum dxhat * xhat
        for c in range(C):
            dxh = dy[n, c] * g[c]
            a += dxh
            p += dxh * (x[n, c] - m) * r
        a /= C
        p /= C
        for c in range(C):
            xh = (x[n, c] - m) * r
            dx[n, c] = r * (dy[n, c] * g[c] - a - xh * p)


@numba.njit(cache=True)
def _layer_norm_dgdb(dy, x, mean, rstd, dg, db):
    N, C = x.shape
    for n in range(N):
        m, r = mean[n], rstd[n]
        for c in range(C):
            dg[c] += dy[n, c] * (x[n, c] - m) * r
            db[c] += dy[n, c]


_forward_s, _forward_p = serial_and_parallel(_forward)
_dx_s, _dx_p = serial_and_parallel(_dx)


def layer_norm_forward(x, g, b, eps):
    """x (N, C), g (C,), b (C,) -> y (N, C), mean (N,), rstd (N,)."""
    return by_size(_forward_s, _forward_p, x.size)(x, g, b, eps)


def layer_norm_backward(dy, x, mean, rstd, g):
    """dy, x (N, C), mean, rstd (N,), g (C,) -> dx (N, C), dg (C,), db (C,)."""
    dx = np.empty_like(x)
    by_size(_dx_s, _dx_p, x.size)(dy, x, mean, rstd, g, dx)
    dg = np.zeros(x.shape[1], dtype=np.float64)
    db = np.zeros(x.shape[1], dtype=np.float64)
    _layer_norm_dgdb(dy, x, mean, rstd, dg, db)
    return dx, dg.astype(x.dtype), db.astype(x.dtype)
