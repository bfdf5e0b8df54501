"""ELMo's scalar mix as a module: softmax-normalised layer weights ``weights`` (L+1,) and
the scale ``gamma`` (1,), learnt by the downstream task (``minipt.ops.scalar_mix``,
Peters et al. 2018 Eq. 1). Weights start at 0 (an even mix), gamma at 1."""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.module import Module
from ..ops.scalar_mix import scalar_mix_backward, scalar_mix_forward


class ScalarMix(Module):
    def __init__(self, n_layers: int, *, dtype=np.float32):
        super().__init__()
        self.add_param("weights", init.zeros(n_layers, dtype))      # (L+1,) w, s = softmax(w)
        self.add_param("gamma", init.ones(1, dtype))                # (1,)
        self._cache = None

    def forward(self, layers: list[np.ndarray]) -> np.ndarray:
        y, self._cache = scalar_mix_forward(layers, self.params["weights"], self.params["gamma"])
        return y

    def backward(self, dy: np.ndarray) -> list[np.ndarray]:
        dlayers, dw, dgamma = scalar_mix_backward(dy, self._cache)
        self.grads["weights"] += dw
        self.grads["gamma"] += dgamma
        return dlayers

    def mix(self) -> np.ndarray:
        """The normalised layer weights s (L+1,)."""
        w = self.params["weights"]
        e = np.exp(w - w.max())
        return e / e.sum()
