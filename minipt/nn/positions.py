"""Position modules: learned absolute (GPT, BERT), sinusoidal (Vaswani et al. 2017) and
T5's bucketed relative position bias (Raffel et al. 2020), one table shared by all layers."""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.module import Module
from ..ops.positions import check_positions, sinusoidal_table, t5_bias_backward, t5_bias_forward
from .embedding import Embedding


class LearnedPositions(Embedding):
    """W_p (max_T, C): forward(T) -> (T, C); backward(dy (B, T, C) or (T, C))."""

    def __init__(self, max_T: int, dim: int, *, rng: np.random.Generator, std: float = 0.02, dtype=np.float32):
        super().__init__(max_T, dim, rng=rng, std=std, dtype=dtype)
        self.max_T = max_T

    def forward(self, T: int, offset: int = 0) -> np.ndarray:
        check_positions(offset + T, self.max_T)
        return super().forward(np.arange(offset, offset + T))

    def backward(self, dy: np.ndarray) -> None:
        super().backward(dy.sum(axis=0) if dy.ndim == 3 else dy)


class SinusoidalPositions(Module):
    """A fixed table, no parameters."""

    def __init__(self, max_T: int, dim: int, *, dtype=np.float32):
        super().__init__()
        self.max_T, self.table = max_T, sinusoidal_table(max_T, dim, dtype)

    def forward(self, T: int, offset: int = 0) -> np.ndarray:
        check_positions(offset + T, self.max_T)
        return self.table[offset:offset + T]

    def backward(self, dy: np.ndarray) -> None:
        return None


class T5RelativeBias(Module):
    """A learned scalar per (bucket, head): forward gives the (H, T, S) additive bias;
    backward takes that bias's gradient (summed over every layer that used it)."""

    def __init__(self, n_heads: int, *, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128,
                 rng: np.random.Generator, std: float = 0.02, dtype=np.float32):
        super().__init__()
        self.bidirectional, self.max_distance = bidirectional, max_distance
        self.add_param("weight", init.normal(rng, (num_buckets, n_heads), std, dtype))   # (buckets, H)
        self._cache = None

    def forward(self, T: int, S: int | None = None, offset: int = 0) -> np.ndarray:
        bias, self._cache = t5_bias_forward(self.params["weight"], T, T if S is None else S,
                                            self.bidirectional, offset, self.max_distance)
        return bias                                                              # (H, T, S)

    def backward(self, dbias: np.ndarray) -> None:
        self.grads["weight"] += t5_bias_backward(dbias, self._cache)
