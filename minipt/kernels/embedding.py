"""Embedding backward as one pass: dw[ids[n]] += dy[n] (twin: np.add.at)."""
import numba


@numba.njit(cache=True)
def embedding_backward(ids, dy, dw):
    """ids (N,) int64, dy (N, C), dw (V, C): accumulate in place, repeated ids summing."""
    N, C = dy.shape
    for n in range(N):
        row = ids[n]
        for c in range(C):
            dw[row, c] += dy[n, c]
