"""LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) modules."""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.module import Module
from ..ops.norms import (
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5, *, dtype=np.float32):
        super().__init__()
        self.eps = eps
        self.add_param("weight", init.ones(dim, dtype))          # gain g (C,)
        self.add_param("bias", init.zeros(dim, dtype))           # b (C,)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        y, self._cache = layer_norm_forward(x, self.params["weight"], self.params["bias"], self.eps)
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx, dg, db = layer_norm_backward(dy, self._cache)
        self.grads["weight"] += dg
        self.grads["bias"] += db
        return dx


class RMSNorm(Module):
    """Scale only: no mean subtraction, no bias (T5, LLaMA)."""

    def __init__(self, dim: int, eps: float = 1e-6, *, dtype=np.float32):
        super().__init__()
        self.eps = eps
        self.add_param("weight", init.ones(dim, dtype))          # g (C,)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        y, self._cache = rms_norm_forward(x, self.params["weight"], self.eps)
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx, dg = rms_norm_backward(dy, self._cache)
        self.grads["weight"] += dg
        return dx
