"""AdaGrad (Duchi, Hazan & Singer 2011), the optimiser GloVe trains with.

Per parameter element, with gradient g:

    G += g^2                      (sum of squared gradients so far)
    p -= lr g / sqrt(G + eps)

Elements that never receive a gradient never move, and frequent ones take ever smaller
steps. GloVe's reference code starts the accumulator at 1 (``initial_accumulator``) so the
first step is at most lr g. Scalars are Python floats: float32 stays float32.
"""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from .base import Optimizer


class AdaGrad(Optimizer):
    def __init__(self, module: Module, lr: float, initial_accumulator: float = 0.0, eps: float = 1e-10):
        super().__init__(module, lr)
        if not initial_accumulator >= 0:
            raise ValueError(f"initial_accumulator must be >= 0, got {initial_accumulator}")
        self.initial_accumulator, self.eps = float(initial_accumulator), float(eps)

    def _update(self) -> None:
        if "sum_sq" not in self.state:
            self.state["sum_sq"] = {name: np.full_like(p, self.initial_accumulator) for name, p, _ in self.entries}
        G = self.state["sum_sq"]
        for name, p, g in self.entries:
            G[name] += g * g
            p -= float(self.lr) * g / np.sqrt(G[name] + self.eps)
