"""Cross-entropy over logits fused with its softmax (Bridle 1990), forward and backward in
one pass each over the rows; twin: the NumPy op in ``minipt.ops.cross_entropy``.

Per row n with target t (rows with keep = 0, BERT's unmasked positions and padding, are
skipped: nll 0, and a zero gradient row without its exponentials):
    lse = max z + log sum_v exp(z_v - max z),   logp_v = z_v - lse,
    nll = (1 - eps) (lse - z_t) + eps (lse - mean_v z_v)      (label smoothing eps)
    dz_v = w_n (exp(z_v - lse) - (1 - eps) [v = t] - eps / V),   w_n = keep_n dloss / count.
Only lse (N,) is kept between the two: the twin keeps logp (N, V), a second array as large
as the logits, and makes four passes over it. float32 uses the vectorisable ``_exp32``,
float64 ``np.exp``; the row sums are float64. ``fastmath`` is limited to reassociation and
FMA contraction, so NaN and inf keep their meaning: a kept row with a non-finite logit gets
a NaN loss, as in the twin (``_exp32`` clamps its argument, so the check is explicit); a
skipped row's logits are not read (the twin's 0-weighted NaN would still reach its sum).

The forward's exponentials fill a row buffer in a loop of their own, then one loop makes
the two float64 row sums. In one loop LLVM vectorised all of it at the sums' width, four
doubles; alone, the float32 exponentials run twice as wide. At 512 x 512 (T5 L's logits)
a forward took 165 us against 251, with the same bits: the sums keep their order
(tests/kernels/test_cross_entropy_kernel.py compares with the one-loop kernel). With
AVX-512 the exponentials of a row, forward and backward, go to ``vexp``'s 16 lanes
(float32; the same bits as the loops, which stay for float64 and other CPUs).

The forward asks for the logits' rows 4 KiB on (``prefetch.py``): in GPT L steps its
call took 0.59-0.60 ms against 0.63-0.65 without. The backward, which reads the same
rows soon after, took no less with them (0.55 against 0.53-0.54 ms) and has none.

In one part the forward's call also writes the logits' gradient for dloss = 1 (the
backward's loop on each row while it is in cache), so the backward of a training step
makes no second pass (in Liger Kernel's cross-entropy the forward writes the gradient
too). The op's forward and backward in T5 L steps (cProfile, 8 steps, three pairs
against the two calls): 0.39-0.42 ms against 0.43-0.48; the same bits. An evaluation
pass pays for a gradient it does not use.
"""
import numba
import numpy as np

from . import threads, vexp
from .attention_rows import _exp, _row_max
from .prefetch import read_ahead

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"attention_rows.py": "c8c5e41590ab0410", "prefetch.py": "90f74125a24a6dd9", "vexp.py": "aa7633403da82a40"}

PART_MIN = 1 << 18          # logits per part on a thread, at least (see ``cross_entropy_rows``)


def cross_entropy(z, t, ignore_index, eps):
    """z (N, V) logits, t (N,) integer targets, ``ignore_index``, eps smoothing -> nll (N,)
    float64, lse (N,), tk (N,), keep (N,), count, bad, and dz (N, V) or None:
    ``cross_entropy_targets`` and then ``cross_entropy_rows`` (skipped when a kept target
    is outside [0, V): ``bad`` >= 0, nll and lse unset). Rows that go in one part take one
    Numba call for both (in a GPT M step the target pass alone was 20 us, most of it a call
    with cold caches), and that call also writes dz, the logits' gradient for dloss = 1
    (``_rows_backward``'s for weights keep / count, the same bits), while each row is in
    cache: the backward then has nothing left to do but hand it over. In parts, dz is
    None and the backward makes it."""
    N, V = z.shape
    if threads.part_count(N, _min_rows(V)) == 1:
        ex = vexp.addresses() if z.dtype == np.float32 else (0, 0)
        return _targets_rows_and_gradient(ex[0], ex[1], z, t, ignore_index, eps)
    tk, keep, count, bad = cross_entropy_targets(t, ignore_index, V)
    nll, lse = cross_entropy_rows(z, tk, keep, eps) if bad < 0 else (np.empty(N), np.empty(N, z.dtype))
    return nll, lse, tk, keep, count, bad, None


@numba.njit(cache=True, nogil=True)
def _targets_rows_and_gradient(ex, ex_scaled, z, t, ignore_index, eps):
    """``cross_entropy`` in one part: the target pass, the rows and their gradient for
    dloss = 1 in one call."""
    N, V = z.shape
    tk, keep, count, bad = cross_entropy_targets(t, ignore_index, V)
    nll, lse, dz = np.empty(N), np.empty(N, dtype=z.dtype), np.empty_like(z)
    if bad < 0:
        _rows(ex, z, tk, keep, eps, nll, lse)
        _rows_backward(ex_scaled, z, tk, lse, keep * (1.0 / max(count, 1)), eps, dz)
    return nll, lse, tk, keep, count, bad, dz


def cross_entropy_rows(z, t, keep, eps):
    """z (N, V) logits, t (N,) targets in [0, V), keep (N,) bool rows that count, eps
    smoothing -> nll (N,) float64, lse (N,) (both 0 on skipped rows). Rows are
    independent, so they run in parts on threads (``threads.in_parts``) of at least
    PART_MIN logits, with the same bits as in one part: GPT L's 2048 x 512 logits, forward
    and backward, took 1.03-1.07 ms in two parts on two threads against 1.55 ms in one."""
    N, V = z.shape
    nll, lse = np.empty(N), np.empty(N, dtype=z.dtype)
    ex = vexp.addresses()[0] if z.dtype == np.float32 else 0
    threads.in_parts(lambda sl: _rows(ex, z[sl], t[sl], keep[sl], eps, nll[sl], lse[sl]), N, _min_rows(V))
    return nll, lse


def cross_entropy_rows_backward(z, t, lse, w, eps):
    """z (N, V), t (N,), lse (N,), w (N,) weights keep * dloss / count -> dz (N, V); a row
    of weight 0 (skipped, or dloss 0) gets zeros without its exponentials. In parts, as
    ``cross_entropy_rows``."""
    dz = np.empty_like(z)
    ex = vexp.addresses()[1] if z.dtype == np.float32 else 0
    N, V = z.shape
    if threads.part_count(N, _min_rows(V)) == 1:                 # no slices, no closure
        _rows_backward(ex, z, t, lse, w, eps, dz)
    else:
        threads.in_parts(lambda sl: _rows_backward(ex, z[sl], t[sl], lse[sl], w[sl], eps, dz[sl]), N, _min_rows(V))
    return dz


@numba.njit(cache=True, nogil=True)
def cross_entropy_targets(t, ignore_index, V):
    """t (N,) integer targets -> tk (N,) int64 (ignored rows read class 0), keep (N,) bool,
    the count kept, and the first kept target outside [0, V) or -1: one pass for what
    took the op seven NumPy calls (17 us a step at GPT M's 2048 targets; the twin's lines
    are in ``minipt.ops.cross_entropy._targets_numpy``)."""
    N = t.shape[0]
    tk = np.empty(N, dtype=np.int64)                      # (N,)
    keep = np.empty(N, dtype=np.bool_)                    # (N,)
    count, bad = 0, -1
    for i in range(N):
        keep[i] = t[i] != ignore_index
        tk[i] = t[i] if keep[i] else 0
        if keep[i]:
            count += 1
            if bad < 0 and (t[i] < 0 or t[i] >= V):
                bad = i
    return tk, keep, count, bad


def _min_rows(V: int) -> int:
    return -(-PART_MIN // max(1, V))


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _rows(ex, z, t, keep, eps, nll, lse):
    """``cross_entropy_rows`` on one part: fills nll (N,), lse (N,); ``ex``: vexp's
    ``exp_shift`` or 0 (Numba's loop)."""
    N, V = z.shape
    e = np.empty(V, dtype=z.dtype)                        # (V,) a row's exp(z - max z)
    for i in range(N):
        read_ahead(z[i])                                  # rows on (prefetch.py)
        if not keep[i]:
            nll[i], lse[i] = 0.0, 0.0
            continue
        m = _row_max(z[i], V)
        if ex != 0:
            vexp.exp_row(ex, z[i], m, e)                  # 16 lanes (vexp.py)
        else:
            for v in range(V):                            # alone, the exponentials vectorise wider
                e[v] = _exp(z[i, v] - m)
        s = 0.0                                           # float64
        total = 0.0                                       # sum of z, for the smoothing term
        for v in range(V):
            s += e[v]
            total += z[i, v]
        ls = m + np.log(s)
        lse[i] = ls
        nll[i] = (1.0 - eps) * (ls - z[i, t[i]]) + eps * (ls - total / V) if np.isfinite(total) else np.nan


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _rows_backward(ex, z, t, lse, w, eps, dz):
    """``cross_entropy_rows_backward`` on one part: fills dz (N, V); ``ex``: vexp's
    ``exp_shift_scaled`` or 0 (Numba's loop).
    Two-index writes, not a row view: a row view written through, with ``_exp`` inlined in
    the same loop, lost the one-hot line below (Numba 0.68; caught by the twin test)."""
    N, V = z.shape
    off = z.dtype.type(eps / V)
    for i in range(N):
        wi = z.dtype.type(w[i])
        if w[i] == 0.0:
            for v in range(V):
                dz[i, v] = 0.0
            continue
        if ex != 0:
            vexp.exp_row_scaled(ex, z[i], lse[i], off, wi, dz[i])
        else:
            for v in range(V):
                dz[i, v] = (_exp(z[i, v] - lse[i]) - off) * wi
        dz[i, t[i]] -= z.dtype.type(1.0 - eps) * wi
