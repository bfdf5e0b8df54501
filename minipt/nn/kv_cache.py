"""Key/value cache for incremental decoding (inference only).

Self-attention appends each step's keys and values (B, H, S_so_far, D); cross-attention
computes the encoder memory's keys and values once and reuses them. ``length`` is how
many positions are cached, so a model continues positions from there.
"""
from __future__ import annotations

import numpy as np


class LayerCache:
    def __init__(self) -> None:
        self.k: np.ndarray | None = None          # (B, H, S, D)
        self.v: np.ndarray | None = None
        self.cross_k: np.ndarray | None = None    # (B, H, S_enc, D), computed once
        self.cross_v: np.ndarray | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add this step's k, v (B, H, t, D); return all cached so far (B, H, S + t, D)."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            if k.shape[:2] != self.k.shape[:2] or k.shape[3] != self.k.shape[3]:
                raise ValueError(f"cache holds keys {self.k.shape}; cannot append {k.shape}")
            self.k = np.concatenate([self.k, k], axis=2)
            self.v = np.concatenate([self.v, v], axis=2)
        return self.k, self.v


class KVCache:
    def __init__(self, n_layers: int):
        self.layers = [LayerCache() for _ in range(n_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length

    def __getitem__(self, i: int) -> LayerCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)
