"""Linear layer module (y = x W^T + b) over ``minipt.ops.linear``."""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.module import Module
from ..ops.linear import linear_backward, linear_forward


class Linear(Module):
    def __init__(self, in_features: int, out_features: int, *, bias: bool = True,
                 rng: np.random.Generator, std: float | None = 0.02, dtype=np.float32):
        """``std`` None uses U(+-1/sqrt(in)); otherwise N(0, std^2) (GPT/BERT)."""
        super().__init__()
        shape = (out_features, in_features)
        w = init.uniform_fan_in(rng, shape, dtype) if std is None else init.normal(rng, shape, std, dtype)
        self.add_param("weight", w)                          # (C_out, C_in)
        if bias:
            self.add_param("bias", init.zeros(out_features, dtype))  # (C_out,)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        y, self._cache = linear_forward(x, self.params["weight"], self.params.get("bias"))
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx, dw, db = linear_backward(dy, self._cache)
        self.grads["weight"] += dw
        if db is not None:
            self.grads["bias"] += db
        return dx
