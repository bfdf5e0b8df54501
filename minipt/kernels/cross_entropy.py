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
"""
import numba
import numpy as np

from .attention import _exp, _row_max


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def cross_entropy_rows(z, t, keep, eps):
    """z (N, V) logits, t (N,) targets in [0, V), keep (N,) bool rows that count, eps
    smoothing -> nll (N,) float64, lse (N,) (both 0 on skipped rows)."""
    N, V = z.shape
    nll = np.empty(N)
    lse = np.empty(N, dtype=z.dtype)
    for i in range(N):
        if not keep[i]:
            nll[i], lse[i] = 0.0, 0.0
            continue
        m = _row_max(z[i], V)
        s = 0.0                                           # float64
        total = 0.0                                       # sum of z, for the smoothing term
        for v in range(V):
            s += _exp(z[i, v] - m)
            total += z[i, v]
        ls = m + np.log(s)
        lse[i] = ls
        nll[i] = (1.0 - eps) * (ls - z[i, t[i]]) + eps * (ls - total / V) if np.isfinite(total) else np.nan
    return nll, lse


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def cross_entropy_rows_backward(z, t, lse, w, eps):
    """z (N, V), t (N,), lse (N,), w (N,) weights keep * dloss / count -> dz (N, V); a row
    of weight 0 (skipped, or dloss 0) gets zeros without its exponentials.
    Two-index writes, not a row view: a row view written through, with ``_exp`` inlined in
    the same loop, lost the one-hot line below (Numba 0.68; caught by the twin test)."""
    N, V = z.shape
    dz = np.empty_like(z)
    off = z.dtype.type(eps / V)
    for i in range(N):
        wi = z.dtype.type(w[i])
        if w[i] == 0.0:
            for v in range(V):
                dz[i, v] = 0.0
            continue
        for v in range(V):
            dz[i, v] = (_exp(z[i, v] - lse[i]) - off) * wi
        dz[i, t[i]] -= z.dtype.type(1.0 - eps) * wi
    return dz
