"""Stochastic gradient descent with momentum (Polyak 1964; Sutskever et al. 2013):
v = mu v + g (+ wd p);  p -= lr v  (Nesterov: p -= lr (g + mu v))."""
from __future__ import annotations

from ..core.module import Module
from .base import Optimizer


class SGD(Optimizer):
    def __init__(self, module: Module, lr: float, momentum: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0):
        super().__init__(module, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        if nesterov and momentum == 0:
            raise ValueError("nesterov needs momentum > 0")
        self.momentum, self.nesterov, self.weight_decay = momentum, nesterov, weight_decay

    def _update(self) -> None:
        lr, mu, wd = self.lr, self.momentum, self.weight_decay
        velocity = self._slot("velocity") if mu else None
        for name, p, g in self.entries:
            d = g + wd * p if wd else g
            if mu:
                v = velocity[name]
                v *= mu
                v += d
                d = d + mu * v if self.nesterov else v
            p -= lr * d
