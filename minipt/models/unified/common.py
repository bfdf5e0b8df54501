"""What the unified models share (UniLM and GLM): the check of a may-attend mask given
as data, and the probe that lets a gradcheck see the embedded inputs of the stack."""
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
    """Wraps a model with ``forward_hidden(x, ...)`` / ``backward_hidden(dloss) -> dx`` so
    ``check_module`` sees the embedded inputs x (B, T, C) as its float input."""

    def __init__(self, model: Module):
        super().__init__()
        self.model = model

    def forward(self, x, *rest):
        return self.model.forward_hidden(x, *rest)[0]

    def backward(self, dloss):
        return self.model.backward_hidden(dloss)
