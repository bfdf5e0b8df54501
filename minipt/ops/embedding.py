"""Embedding lookup: row ``ids`` of a table W (V, C) (Bengio et al. 2003's matrix C).

The forward is a gather; the backward is a scatter-add: a token id that occurs k times
in the batch receives the sum of its k upstream gradients.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..core.checks import check_float, check_ids, check_ndim


def embedding_forward(ids: np.ndarray, w: np.ndarray):
    """ids (...) int, w (V, C) -> y (..., C)."""
    check_float("weight", w)
    check_ndim("weight", w, 2)
    check_ids("ids", ids, w.shape[0])
    return w[ids], (ids, w.shape, w.dtype)                  # (..., C)


def embedding_backward_numpy(ids: np.ndarray, dy: np.ndarray, dw: np.ndarray) -> None:
    """ids (N,), dy (N, C): dw[ids[n]] += dy[n], repeated ids accumulating."""
    np.add.at(dw, ids, dy)


def embedding_backward(dy: np.ndarray, cache) -> np.ndarray:
    """dy (..., C) -> dw (V, C)."""
    ids, shape, dtype = cache
    dw = np.zeros(shape, dtype=dtype)                       # (V, C)
    scatter = kernels.get("embedding_backward") or embedding_backward_numpy
    scatter(np.ascontiguousarray(ids.reshape(-1), dtype=np.int64),
            np.ascontiguousarray(dy.reshape(-1, shape[1]), dtype=dtype), dw)
    return dw
