"""Parameter initialisers. Each takes an explicit ``np.random.Generator``.

GPT-1 and BERT draw weights from N(0, 0.02^2); GPT-2 scales residual projections by
1/sqrt(2N) (``std`` is passed in by the model).
"""
from __future__ import annotations

import numpy as np


def normal(rng: np.random.Generator, shape, std: float = 0.02, dtype=np.float32) -> np.ndarray:
    return (rng.standard_normal(shape) * std).astype(dtype)


def uniform_fan_in(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the last dimension (PyTorch's
    default for Linear), for models without a paper-given scheme."""
    bound = 1.0 / np.sqrt(shape[-1])
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def zeros(shape, dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def ones(shape, dtype=np.float32) -> np.ndarray:
    return np.ones(shape, dtype=dtype)
