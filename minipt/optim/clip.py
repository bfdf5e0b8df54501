"""Global gradient-norm clipping (Pascanu et al. 2013): if ||g|| > max_norm over all
gradients together, scale every gradient by max_norm / ||g||."""
from __future__ import annotations

import math

import numpy as np

from ..core.module import Module


def grad_norm(module: Module) -> float:
    """L2 norm over all gradients (tied ones counted once), accumulated in float64."""
    return math.sqrt(sum(float(np.dot(g.ravel(), g.ravel())) for _, g in module.named_grads()))


def clip_grad_norm(module: Module, max_norm: float) -> float:
    """Scale gradients in place so their global norm is at most ``max_norm``; returns the
    norm before clipping. A non-finite norm is returned without scaling: the caller stops."""
    if max_norm <= 0:
        raise ValueError(f"max_norm must be > 0, got {max_norm}")
    total = grad_norm(module)
    if math.isfinite(total) and total > max_norm:
        scale = max_norm / (total + 1e-6)
        for _, g in module.named_grads():
            g *= scale
    return total
