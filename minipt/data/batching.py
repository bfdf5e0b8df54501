"""Batches for language-model training: random windows of a token stream.

The nanoGPT-style sampler (Karpathy 2023) draws B random offsets into one long stream
of token ids and returns inputs x = stream[o : o + T] and targets y = stream[o + 1 :
o + T + 1]: the causal LM objective of GPT-1 (Radford et al. 2018) on packed text.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.checks import check_positive_int


class TokenStream:
    """Train and validation token streams with a ``get_batch(split, rng)`` for
    ``minipt.train.train``."""

    def __init__(self, train: np.ndarray, val: np.ndarray, block_size: int, batch_size: int):
        for name, arr in (("train", train), ("val", val)):
            if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
                raise TypeError(f"{name} stream: expected a 1-D integer array of token ids")
            if len(arr) < block_size + 1:
                raise ValueError(f"{name} stream has {len(arr)} tokens; a batch needs at least "
                                 f"block_size + 1 = {block_size + 1}")
        check_positive_int("batch_size", batch_size)
        self.splits = {"train": train.astype(np.int64), "val": val.astype(np.int64)}
        self.block_size, self.batch_size = block_size, batch_size

    def get_batch(self, split: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        if split not in self.splits:
            raise KeyError(f"split must be one of {sorted(self.splits)}, got {split!r}")
        data, T = self.splits[split], self.block_size
        offsets = rng.integers(0, len(data) - T, size=self.batch_size)        # (B,)
        index = offsets[:, None] + np.arange(T)[None, :]                      # (B, T)
        return data[index], data[index + 1]                                   # x (B, T), y (B, T)

    def batches(self) -> Callable[[str, np.random.Generator], tuple[np.ndarray, np.ndarray]]:
        return self.get_batch
