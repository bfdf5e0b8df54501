"""Position modules: how a Transformer, which is order-blind, learns where a token is.

- ``LearnedPositions``: a learned table W_p (max_T, C) added to the token embeddings,
  h0 = U W_e + W_p (GPT-1, Radford et al. 2018; BERT, Devlin et al. 2019).
- ``SinusoidalPositions``: the fixed table of Vaswani et al. 2017, Sec. 3.5 (no parameters).
- ``T5RelativeBias``: one learned scalar per (relative-distance bucket, head), added to
  the attention scores of every layer (Raffel et al. 2020, Sec. 2.1; after Shaw et al.
  2018). One table is shared by all the layers of a stack; its gradient is the sum of the
  layers' bias gradients (``TransformerStack.dattn_bias``), scattered back by bucket.
- Rotary positions (RoPE, Su et al. 2021) act on q and k inside ``MultiHeadAttention``
  (``rope=True``), so they have no module here.

All take ``offset``: with a KV cache, the new tokens sit at positions offset..offset+T-1.
"""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.checks import check_float
from ..core.module import Module
from ..ops.positions import (
    check_positions,
    sinusoidal_table,
    t5_bias_backward,
    t5_bias_forward,
)
from .embedding import Embedding


def _check_length(T: int, offset: int) -> None:
    if int(T) != T or T < 1 or int(offset) != offset or offset < 0:
        raise ValueError(f"positions need a length T >= 1 and an offset >= 0, got T {T}, offset {offset}")


class LearnedPositions(Embedding):
    """An Embedding over arange(offset, offset + T): W_p (max_T, C).

    Looking up consecutive ids is a slice, so forward returns rows offset..offset+T-1
    of the table (T, C) and backward adds the batch-summed gradient into those rows.
    ``at(positions)`` looks up a position id per token instead (RoBERTa's, counted over the
    real tokens of each row): a gather (B, T, C), whose backward is the Embedding's scatter-add.
    """

    def __init__(self, max_T: int, dim: int, *, rng: np.random.Generator, std: float = 0.02, dtype=np.float32):
        super().__init__(max_T, dim, rng=rng, std=std, dtype=dtype)
        self.max_T = max_T
        self._span = None

    def forward(self, T: int, offset: int = 0) -> np.ndarray:
        """-> (T, C), broadcast over the batch when added to token embeddings (B, T, C)."""
        _check_length(T, offset)
        check_positions(offset + T, self.max_T)
        self._span = (offset, offset + T)
        return self.params["weight"][offset:offset + T].copy()                   # (T, C)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """positions (B, T) int -> W_p[positions] (B, T, C)."""
        self._span = "gather"
        return super().forward(positions)

    def backward(self, dy: np.ndarray) -> None:
        """dy (B, T, C) or (T, C): rows offset..offset+T-1 of W_p receive sum_b dy[b]."""
        if self._span is None:
            raise RuntimeError("LearnedPositions.backward needs a forward first")
        if self._span == "gather":
            return super().backward(dy)                                           # scatter-add by id
        lo, hi = self._span
        check_float("dy", dy)
        if dy.shape[-2:] != (hi - lo, self.params["weight"].shape[1]) or dy.ndim not in (2, 3):
            raise ValueError(f"dy: expected (B, {hi - lo}, {self.params['weight'].shape[1]}) "
                             f"or ({hi - lo}, {self.params['weight'].shape[1]}), got {dy.shape}")
        self.grads["weight"][lo:hi] += dy.sum(axis=0) if dy.ndim == 3 else dy      # (T, C)
        return None


class SinusoidalPositions(Module):
    """PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(t / 10000^(2i/C)): fixed, no parameters."""

    def __init__(self, max_T: int, dim: int, *, dtype=np.float32):
        super().__init__()
        self.max_T, self.table = max_T, sinusoidal_table(max_T, dim, dtype)      # (max_T, C)

    def forward(self, T: int, offset: int = 0) -> np.ndarray:
        """-> (T, C)."""
        _check_length(T, offset)
        check_positions(offset + T, self.max_T)
        return self.table[offset:offset + T].copy()

    def backward(self, dy: np.ndarray) -> None:
        return None                                                              # nothing to learn


class T5RelativeBias(Module):
    """A learned scalar per (bucket, head): ``weight`` (num_buckets, H).

    forward(T, S, offset) -> the additive bias (H, T, S) of queries offset..offset+T-1
    over keys 0..S-1; backward(dbias (H, T, S) or (B, H, T, S)) scatter-adds it by bucket.
    The encoder uses ``bidirectional=True``, the decoder's self-attention False.
    """

    def __init__(self, n_heads: int, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
                 rng: np.random.Generator, std: float = 0.02, dtype=np.float32):
        super().__init__()
        if num_buckets < 2 or (bidirectional and num_buckets < 4):
            raise ValueError(f"num_buckets too small for T5 buckets: {num_buckets}")
        if max_distance < num_buckets // (4 if bidirectional else 2) + 1:
            raise ValueError(f"max_distance {max_distance} must exceed the exact-bucket range of "
                             f"{num_buckets} buckets")
        self.n_heads, self.bidirectional, self.max_distance = n_heads, bidirectional, max_distance
        self.add_param("weight", init.normal(rng, (num_buckets, n_heads), std, dtype))   # (buckets, H)
        self._cache = None

    def forward(self, T: int, S: int | None = None, offset: int = 0) -> np.ndarray:
        _check_length(T, offset)
        S = T + offset if S is None else S
        bias, self._cache = t5_bias_forward(self.params["weight"], T, S, self.bidirectional, offset,
                                            self.max_distance)
        return bias                                                              # (H, T, S)

    def backward(self, dbias: np.ndarray) -> None:
        """dbias (H, T, S) or (B, H, T, S): the summed gradient of every layer that used the bias."""
        if self._cache is None:
            raise RuntimeError("T5RelativeBias.backward needs a forward first")
        buckets, _ = self._cache
        want = (self.n_heads,) + buckets.shape
        if dbias.shape[-3:] != want:
            raise ValueError(f"dbias: expected (..., {want[0]}, {want[1]}, {want[2]}) = (H, T, S), got {dbias.shape}")
        self.grads["weight"] += t5_bias_backward(dbias, self._cache)
        return None
