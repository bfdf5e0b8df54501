"""A small task model on frozen features: ELMo's recipe for downstream use (Peters et al.
2018, Sec. 3.3) and the linear probe of representation analyses (Belinkov et al. 2017;
Tenney et al. 2019, who also read off layer weights of a scalar mix).

``TokenProbe`` classifies each token from features it cannot change: with one layer it
is a softmax regression on that layer; with several it first learns ELMo's scalar mix
gamma sum_j softmax(w)_j h_j, then the softmax regression. ``fit_probe`` trains it full-
batch with Adam and returns held-out accuracy, so static vectors, each ELMo layer and
the mix are compared by the same model and the same budget.
"""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from ..nn.linear import Linear
from ..nn.scalar_mix import ScalarMix
from ..ops.cross_entropy import cross_entropy_backward, cross_entropy_forward


class TokenProbe(Module):
    def __init__(self, n_layers: int, dim: int, n_classes: int, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.mix = ScalarMix(n_layers, dtype=dtype) if n_layers > 1 else None
        self.classifier = Linear(dim, n_classes, rng=rng, std=None, dtype=dtype)
        self._ce = None

    def forward(self, layers: list[np.ndarray], labels: np.ndarray | None = None):
        """layers: L+1 arrays (N, C) -> loss (or None), logits (N, n_classes)."""
        x = self.mix(layers) if self.mix is not None else layers[0]  # (N, C)
        logits = self.classifier(x)                                  # (N, K)
        loss = None
        if labels is not None:
            loss, self._ce = cross_entropy_forward(logits, labels)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        dx = self.classifier.backward(cross_entropy_backward(dloss, self._ce))
        if self.mix is not None:
            self.mix.backward(dx)                                    # features stay frozen


def fit_probe(train_layers: list[np.ndarray], train_labels: np.ndarray, test_layers: list[np.ndarray],
              test_labels: np.ndarray, *, steps: int = 300, lr: float = 0.05, seed: int = 0) -> tuple[float, TokenProbe]:
    """Train a ``TokenProbe`` on (N, C) features per layer; -> (test accuracy, probe)."""
    from ..optim import Adam
    if len(train_labels) == 0 or len(test_labels) == 0:
        raise ValueError("fit_probe: expected at least one training and one test token")
    dtype = train_layers[0].dtype
    probe = TokenProbe(len(train_layers), train_layers[0].shape[1], int(max(train_labels.max(), test_labels.max())) + 1,
                       rng=np.random.default_rng(seed), dtype=dtype)
    opt = Adam(probe, lr=lr)
    for _ in range(steps):
        probe.zero_grad()
        probe(train_layers, train_labels)
        probe.backward()
        opt.step()
    _, logits = probe(test_layers)
    return float(np.mean(logits.argmax(-1) == test_labels)), probe
