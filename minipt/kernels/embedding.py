"""Embedding backward (the table C of Bengio et al. 2003, "A Neural Probabilistic
Language Model") as one scatter-add pass; twin: ``embedding_backward_numpy`` in
``minipt.ops.embedding`` (``np.add.at``).

    dw[ids[n], :] += dy[n, :]   for n = 0 .. N-1,

so a token that occurs k times receives the sum of its k upstream rows. The loop runs
serially in n: rows of dw that repeat would race under threads, and the whole pass is
memory traffic of N * C elements, far below a millisecond at our sizes.
"""
import numba


@numba.njit(cache=True, nogil=True)
def embedding_backward(ids, dy, dw):
    """ids (N,) int64, dy (N, C), dw (V, C): accumulate in place, repeated ids summing.

    Raises IndexError for an id outside [0, V) (the kernel writes raw memory, so it
    checks every id before the first write)."""
    N, C = dy.shape
    V = dw.shape[0]
    for n in range(N):
        if ids[n] < 0 or ids[n] >= V:
            raise IndexError("embedding_backward: a token id is outside [0, V)")
    for n in range(N):
        row = ids[n]
        for c in range(C):
            dw[row, c] += dy[n, c]                        # (C,) row of dw
