"""Gradient clipping by the global norm (Pascanu, Mikolov & Bengio 2013, "On the
difficulty of training recurrent neural networks", algorithm 1).

All gradients are treated as one vector g. If ||g||_2 > max_norm every gradient is scaled
in place by max_norm / (||g|| + 1e-6), so the direction is kept and the norm lands just
under max_norm. A tied parameter's gradient is one array and is counted once.

A NaN or infinite norm is returned *without* scaling anything: scaling by
max_norm / inf would silently zero the step (and NaN would spread), so the caller
decides -- ``minipt.train`` stops with an error and keeps the last good checkpoint.
``clip_grad_norm(module, math.inf)`` measures the norm without ever clipping.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from ..core.module import Module

Grads = Module | Mapping[str, np.ndarray] | Iterable[np.ndarray]


def _unique_grads(grads: Grads) -> list[np.ndarray]:
    """The gradient arrays of a module, a {name: grad} dict or a list, each array once."""
    if isinstance(grads, Module):
        arrays = [g for _, g in grads.named_grads()]
    elif isinstance(grads, Mapping):
        arrays = list(grads.values())
    elif isinstance(grads, np.ndarray):
        raise TypeError("clip_grad_norm: expected a Module, a dict or a list of gradient arrays, "
                        "got a single array (wrap it in a list)")
    else:
        arrays = list(grads)
    seen: set[int] = set()
    unique = []
    for g in arrays:
        if not isinstance(g, np.ndarray) or g.dtype.kind != "f":
            got = g.dtype if isinstance(g, np.ndarray) else type(g).__name__
            raise TypeError(f"clip_grad_norm: gradients must be float arrays, got {got}")
        if id(g) not in seen:
            seen.add(id(g))
            unique.append(g)
    return unique


def _sum_squares(g: np.ndarray) -> float:
    flat = g.ravel()                                   # (N,), a view when g is contiguous
    with np.errstate(over="ignore"):                   # overflow is handled just below
        s = float(np.dot(flat, flat))                  # BLAS dot in g's dtype
    if math.isinf(s) and np.isfinite(flat).all():      # float32 overflow of a finite g
        wide = flat.astype(np.float64)
        s = float(np.dot(wide, wide))
    return s


def grad_norm(grads: Grads) -> float:
    """Global L2 norm of all gradients (tied ones once): each array's sum of squares in its
    own dtype (re-done in float64 if only float32 overflowed), summed in float64."""
    return math.sqrt(sum(_sum_squares(g) for g in _unique_grads(grads)))


def clip_grad_norm(grads: Grads, max_norm: float) -> float:
    """Scale gradients in place so their global norm is at most ``max_norm``; returns the
    norm *before* clipping. A non-finite norm is returned and nothing is scaled."""
    if not max_norm > 0:
        raise ValueError(f"max_norm must be > 0, got {max_norm}")
    arrays = _unique_grads(grads)
    total = math.sqrt(sum(_sum_squares(g) for g in arrays))
    if math.isfinite(total) and total > max_norm:
        scale = float(max_norm) / (total + 1e-6)       # Python float: float32 stays float32
        for g in arrays:
            g *= scale
    return total
