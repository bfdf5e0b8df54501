"""Activation modules (no parameters), for composing with ``Sequential``."""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from ..ops import activations as A

_PAIRS = {
    "gelu": (A.gelu_forward, A.gelu_backward),
    "gelu_tanh": (A.gelu_tanh_forward, A.gelu_tanh_backward),
    "relu": (A.relu_forward, A.relu_backward),
    "tanh": (A.tanh_forward, A.tanh_backward),
    "sigmoid": (A.sigmoid_forward, A.sigmoid_backward),
}


def activation_pair(name: str):
    """The (forward, backward) op pair of an element-wise activation by name."""
    if name not in _PAIRS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_PAIRS)}")
    return _PAIRS[name]


class Activation(Module):
    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self._fwd, self._bwd = activation_pair(name)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        y, self._cache = self._fwd(x)
        return y

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return self._bwd(dy, self._cache)


def GELU(approximate: str = "none") -> Activation:
    """GELU, exact (``"none"``, BERT) or tanh-approximated (``"tanh"``, GPT-2)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return Activation("gelu_tanh" if approximate == "tanh" else "gelu")


def ReLU() -> Activation:
    return Activation("relu")


def Tanh() -> Activation:
    return Activation("tanh")


def Sigmoid() -> Activation:
    return Activation("sigmoid")
