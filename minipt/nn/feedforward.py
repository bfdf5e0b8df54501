"""The position-wise feed-forward network of a Transformer block (Vaswani et al. 2017).

GELU/ReLU: y = c_proj(act(c_fc(x))) (names as Hugging Face GPT-2: mlp.c_fc, mlp.c_proj).
SwiGLU (Shazeer 2020; LLaMA, Touvron et al. 2023): y = w2(silu(w1 x) * w3 x), three
matrices, gate w1, up w3, down w2 (LLaMA's names). GEGLU (Shazeer 2020; T5 v1.1's
"gated-gelu"): the same three matrices with gelu_tanh for silu. Dropout on the output.
"""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from ..ops.activations import (
    geglu_backward,
    geglu_forward,
    swiglu_backward,
    swiglu_forward,
)
from .activations import activation_pair
from .dropout import Dropout
from .linear import Linear

_GATED = {"swiglu": (swiglu_forward, swiglu_backward), "geglu": (geglu_forward, geglu_backward)}


class FeedForward(Module):
    def __init__(self, d_model: int, d_ff: int, *, rng: np.random.Generator, activation: str = "gelu",
                 bias: bool = True, dropout: float = 0.0, std: float = 0.02, out_std: float | None = None,
                 dtype=np.float32):
        super().__init__()
        self.activation = activation
        out_std = std if out_std is None else out_std
        if activation in _GATED:
            self.w1 = Linear(d_model, d_ff, bias=bias, rng=rng, std=std, dtype=dtype)   # gate
            self.w3 = Linear(d_model, d_ff, bias=bias, rng=rng, std=std, dtype=dtype)   # up
            self.w2 = Linear(d_ff, d_model, bias=bias, rng=rng, std=out_std, dtype=dtype)  # down
        else:
            self._act = activation_pair(activation)
            self.c_fc = Linear(d_model, d_ff, bias=bias, rng=rng, std=std, dtype=dtype)
            self.c_proj = Linear(d_ff, d_model, bias=bias, rng=rng, std=out_std, dtype=dtype)
        self.dropout = Dropout(dropout, rng=np.random.default_rng(rng.integers(2**63)) if dropout else None)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """x (B, T, C) -> (B, T, C)."""
        if self.activation in _GATED:
            h, self._cache = _GATED[self.activation][0](self.w1(x), self.w3(x))   # (B, T, F)
            y = self.w2(h)
        else:
            h, self._cache = self._act[0](self.c_fc(x))                  # (B, T, F)
            y = self.c_proj(h)
        return self.dropout(y)

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dy = self.dropout.backward(dy)
        if self.activation in _GATED:
            da, db = _GATED[self.activation][1](self.w2.backward(dy), self._cache)   # (B, T, F) each
            return self.w1.backward(da) + self.w3.backward(db)
        return self.c_fc.backward(self._act[1](self.c_proj.backward(dy), self._cache))
