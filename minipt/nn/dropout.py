"""Dropout module (Srivastava et al. 2014). It holds its own Generator, so a gradient
check (and a resumed run) can rewind it and replay the same masks."""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from ..ops.dropout import dropout_backward, dropout_forward


class Dropout(Module):
    def __init__(self, p: float, *, rng: np.random.Generator | None = None):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        if p > 0 and rng is None:
            raise ValueError("Dropout with p > 0 needs an np.random.Generator (rng)")
        self.p, self.rng = p, rng
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        y, self._cache = dropout_forward(x, self.p, self.rng, self.training)
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return dropout_backward(dy, self._cache)
