"""Token (or position) embedding table W (V, C) over ``minipt.ops.embedding``."""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.module import Module
from ..ops.embedding import embedding_backward, embedding_forward


class Embedding(Module):
    no_weight_decay = True          # AdamW leaves embeddings undecayed by default

    def __init__(self, num_embeddings: int, dim: int, *, rng: np.random.Generator,
                 std: float = 0.02, dtype=np.float32):
        super().__init__()
        self.add_param("weight", init.normal(rng, (num_embeddings, dim), std, dtype))  # (V, C)
        self._cache = None

    def forward(self, ids: np.ndarray) -> np.ndarray:
        y, self._cache = embedding_forward(ids, self.params["weight"])
        return y                                                 # (..., C)

    def backward(self, dy: np.ndarray) -> None:
        self.grads["weight"] += embedding_backward(dy, self._cache)
        return None                                              # ids have no gradient
