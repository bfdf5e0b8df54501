"""Stochastic gradient descent with momentum.

Heavy-ball momentum (Polyak 1964), as used for deep nets by Sutskever, Martens, Dahl &
Hinton (2013, "On the importance of initialization and momentum in deep learning").
Nesterov's (1983) look-ahead is written in the form of Bengio, Boulanger-Lewandowski &
Pascanu (2013), which needs the gradient at the current parameters only:

    d = g + wd p                   (L2 weight decay folded into the gradient, optional)
    v = mu v + d                   (velocity, kept per parameter in the parameter's dtype)
    p -= lr v                      (heavy ball)
    p -= lr (d + mu v)             (Nesterov: step along the velocity one step ahead)

Every scalar is a Python float, so float32 parameters stay float32 (NEP 50).
"""
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
            raise ValueError("nesterov needs momentum > 0, got momentum=0")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        self.momentum, self.nesterov, self.weight_decay = float(momentum), bool(nesterov), float(weight_decay)

    def decay_names(self) -> list[str]:
        """SGD's L2 decay applies to every parameter (empty list when weight_decay is 0)."""
        return [name for name, _, _ in self.entries] if self.weight_decay else []

    def _update(self) -> None:
        lr, mu, wd = float(self.lr), self.momentum, self.weight_decay
        velocity = self._slot("velocity") if mu else None
        for name, p, g in self.entries:
            d = g + wd * p if wd else g                  # same shape as p
            if mu:
                v = velocity[name]
                v *= mu
                v += d
                d = d + mu * v if self.nesterov else v
            p -= lr * d                                  # in place: others hold p
