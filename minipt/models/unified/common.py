"""What the unified models share: the check of a may-attend mask given as data (UniLM,
GLM), and the probe that lets a gradcheck see the embedded inputs of the stack (UniLM,
GLM, the prefix LM)."""
from __future__ import annotations

import numpy as np

from ...core.module import Module


def check_mask(mask, B: int, T: int, S: int | None = None) -> np.ndarray:
    """A boolean may-attend mask (T, S) or (B, T, S) for B rows of T queries and S keys."""
    S = T if S is None else S
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask: expected a boolean may-attend array, got dtype {mask.dtype}")
    if mask.shape not in ((T, S), (B, T, S)):
        raise ValueError(f"mask: expected shape ({T}, {S}) or ({B}, {T}, {S}), got {mask.shape}")
    return mask


class HiddenProbe(Module):
    """Wraps a model with ``forward(x, ...) -> (loss, logits)`` and ``backward(dloss) -> dx``
    methods from embedded inputs (by default ``forward_hidden`` / ``backward_hidden``) so
    ``check_module`` sees the embedded inputs x (B, T, C) as its float input."""

    def __init__(self, model: Module, forward: str = "forward_hidden", backward: str = "backward_hidden"):
        super().__init__()
        self.model = model
        self._forward, self._backward = getattr(model, forward), getattr(model, backward)

    def forward(self, x, *rest):
        return self._forward(x, *rest)[0]

    def backward(self, dloss):
        return self._backward(dloss)
