"""Sequential composition: forward runs the layers in order, backward in reverse."""
from __future__ import annotations

from ..core.module import Module


class Sequential(Module):
    def __init__(self, *layers: Module):
        super().__init__()
        if not layers:
            raise ValueError("Sequential needs at least one layer")
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def backward(self, dy):
        for layer in reversed(self.layers):
            dy = layer.backward(dy)
        return dy
