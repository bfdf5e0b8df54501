"""Adam / AdamW update (Kingma & Ba 2015; Loshchilov & Hutter 2019) of one parameter in
one pass over its elements; twin: ``adam_update_numpy`` in ``minipt.optim.adam``.

The NumPy twin makes about ten passes over the arrays (and two temporaries); here each
element of p, g, m, v is read once and p, m, v written once, in the twin's order of
operations:
    g' = g + l2 p;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
    p -= decay p;   p -= step m / (sqrt(v) / root_c2 + eps)
All scalars are cast to the arrays' dtype first, so float32 stays float32. Serial: one
parameter is at most a few hundred thousand elements in the models here.

``adam_update_all`` updates every parameter in one call, from their arrays' addresses
(``calls.pointer_like``), instead of one call each with its Python and Numba argument
checks: an AdamW step of BERT at benchmarks/bench_bert.py's sizes S / M / L took 96 / 633 /
2077 us against 186 / 783 / 2307. The same loop per parameter, with no fastmath: the same
bits (tests/kernels/test_adam_kernel.py). ``nogil``: from enough elements on the optimiser
gives each of two threads half of the parameters (``threads.two_threads_for``).
"""
import numba
import numpy as np

from . import calls

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"calls.py": "7c924b4ecd3fa4b0"}


@numba.njit(cache=True, error_model="numpy")
def adam_update(p, g, m, v, step, b1, b2, root_c2, eps, decay, l2):
    """p, g, m, v (N,) C-contiguous, one dtype; p, m, v updated in place."""
    t = p.dtype.type
    c1, c2 = t(1.0 - b1), t(1.0 - b2)                    # as the twin: float64, then cast
    step, b1, b2, root_c2, eps, decay, l2 = t(step), t(b1), t(b2), t(root_c2), t(eps), t(decay), t(l2)
    for i in range(p.shape[0]):
        gi = g[i] + l2 * p[i]
        mi = b1 * m[i] + c1 * gi
        vi = b2 * v[i] + c2 * (gi * gi)
        m[i] = mi
        v[i] = vi
        pi = p[i] - decay * p[i]
        p[i] = pi - step * mi / (np.sqrt(vi) / root_c2 + eps)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def adam_update_all(arrays, sizes, like, decays, l2s, step, b1, b2, root_c2, eps):
    """arrays (n, 4) int64: the addresses of parameter i's p, g, m, v, each (sizes[i],)
    C-contiguous of ``like``'s dtype; decays, l2s (n,) float64 -> ``adam_update`` of each."""
    for i in range(sizes.shape[0]):
        n = (sizes[i],)
        p = numba.carray(calls.pointer_like(arrays[i, 0], like), n)
        g = numba.carray(calls.pointer_like(arrays[i, 1], like), n)
        m = numba.carray(calls.pointer_like(arrays[i, 2], like), n)
        v = numba.carray(calls.pointer_like(arrays[i, 3], like), n)
        adam_update(p, g, m, v, step, b1, b2, root_c2, eps, decays[i], l2s[i])
