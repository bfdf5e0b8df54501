"""Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019).

m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  mhat = m / (1 - b1^t);  vhat = v / (1 - b2^t)
Adam:  p -= lr mhat / (sqrt(vhat) + eps)          (weight decay, if any, added to g: L2)
AdamW: p -= lr (mhat / (sqrt(vhat) + eps) + wd p)  (decoupled decay; GPT-1 used 0.01)
AdamW leaves biases, norm gains (ndim < 2) and embeddings undecayed by default.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..core.module import Module
from .base import Optimizer


def default_no_decay(module: Module) -> set[str]:
    """Names of biases, norm gains (ndim < 2) and embedding tables."""
    names = {name for name, p in module.named_parameters() if p.ndim < 2}
    for mod_name, mod in module.named_modules():
        if getattr(mod, "no_weight_decay", False):
            ids = {id(p) for p in mod.params.values()}
            names |= {n for n, p in module.named_parameters() if id(p) in ids}
    return names


class Adam(Optimizer):
    decoupled = False

    def __init__(self, module: Module, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0,
                 no_decay: Callable[[str, np.ndarray], bool] | None = None):
        super().__init__(module, lr)
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        self.b1, self.b2, self.eps, self.weight_decay = float(b1), float(b2), float(eps), float(weight_decay)
        skip = default_no_decay(module) if no_decay is None else \
            {n for n, p, _ in self.entries if no_decay(n, p)}
        self._decay = {n: (n not in skip if self.decoupled else True) for n, _, _ in self.entries}

    def decay_names(self) -> list[str]:
        return [n for n, _, _ in self.entries if self._decay[n] and self.weight_decay]

    def _update(self) -> None:
        m_all, v_all = self._slot("m"), self._slot("v")
        b1, b2, t = self.b1, self.b2, self.t
        step = self.lr / (1.0 - b1 ** t)            # folds mhat's correction into lr
        root_c2 = math.sqrt(1.0 - b2 ** t)
        for name, p, g in self.entries:
            m, v = m_all[name], v_all[name]
            if self.weight_decay and not self.decoupled:
                g = g + self.weight_decay * p
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * (g * g)
            if self.decoupled and self._decay[name] and self.weight_decay:
                p -= (self.lr * self.weight_decay) * p
            p -= step * m / (np.sqrt(v) / root_c2 + self.eps)


class AdamW(Adam):
    decoupled = True

    def __init__(self, module: Module, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01,
                 no_decay: Callable[[str, np.ndarray], bool] | None = None):
        super().__init__(module, lr, betas, eps, weight_decay, no_decay)
