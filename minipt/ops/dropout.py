"""Inverted dropout (Srivastava et al. 2014): zero each element with probability p and
scale the survivors by 1 / (1 - p), so evaluation needs no rescaling (identity)."""
from __future__ import annotations

import numpy as np

from ..core.checks import check_float


def dropout_forward(x: np.ndarray, p: float, rng: np.random.Generator | None, training: bool = True):
    """x (...) -> y (...). Identity when not training or p == 0."""
    check_float("x", x)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x, None
    if rng is None:
        raise ValueError("dropout in training mode needs an np.random.Generator (rng)")
    mask = (rng.random(x.shape, dtype=x.dtype) >= p) * x.dtype.type(1.0 / (1.0 - p))
    return x * mask, mask


def dropout_backward(dy: np.ndarray, cache) -> np.ndarray:
    mask = cache
    return dy if mask is None else dy * mask
