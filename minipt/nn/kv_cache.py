"""Key/value cache for incremental decoding (inference only).

Autoregressive decoding (Vaswani et al. 2017, Sec. 3.2.3; GPT-2's ``past``) recomputes
nothing: at step t the new token's query attends to the keys and values of all earlier
tokens, which do not change once computed. So each self-attention layer keeps
k, v (B, H, S_so_far, D) and appends this step's (B, H, t, D); a cross-attention layer
computes the encoder memory's k, v (B, H, S_enc, D) once and reuses them every step.

``length`` is how many positions are cached: the model continues learned or rotary
positions from there (the cache does not know about positions). Appending is amortised
O(1): a buffer doubles its capacity along S and the layer returns views of its filled
part. There is no backward through a cache: a module that ran a cached forward refuses
``backward`` (decoding is inference).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_positive_int


class LayerCache:
    """One layer's slot: self-attention k, v (appending) and cross-attention k, v (once)."""

    def __init__(self, max_length: int | None = None) -> None:
        self.max_length = max_length
        self._k: np.ndarray | None = None          # (B, H, capacity, D)
        self._v: np.ndarray | None = None
        self._len = 0
        self.cross_k: np.ndarray | None = None     # (B, H, S_enc, D), computed once
        self.cross_v: np.ndarray | None = None

    @property
    def length(self) -> int:
        return self._len

    @property
    def k(self) -> np.ndarray | None:
        return None if self._k is None else self._k[:, :, :self._len]   # (B, H, S, D)

    @property
    def v(self) -> np.ndarray | None:
        return None if self._v is None else self._v[:, :, :self._len]   # (B, H, S, D)

    def append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add this step's k, v (B, H, t, D); return everything cached (B, H, S + t, D)."""
        if k.ndim != 4 or k.shape != v.shape:
            raise ValueError(f"cache: k and v must both be (B, H, t, D), got {k.shape} and {v.shape}")
        t = k.shape[2]
        new_len = self._len + t
        if self.max_length is not None and new_len > self.max_length:
            raise ValueError(f"cache: sequence length {new_len} exceeds the cache's max_length {self.max_length}")
        if self._k is None:
            cap = max(t, 16) if self.max_length is None else self.max_length
            B, H, _, D = k.shape
            self._k = np.empty((B, H, cap, D), dtype=k.dtype)             # (B, H, capacity, D)
            self._v = np.empty((B, H, cap, D), dtype=v.dtype)
        else:
            want = (self._k.shape[0], self._k.shape[1], self._k.shape[3])
            if (k.shape[0], k.shape[1], k.shape[3]) != want or k.dtype != self._k.dtype:
                raise ValueError(f"cache holds keys (B, H, D) = {want} {self._k.dtype}; "
                                 f"cannot append {k.shape} {k.dtype}")
            if new_len > self._k.shape[2]:
                self._grow(max(new_len, 2 * self._k.shape[2]))
        self._k[:, :, self._len:new_len] = k
        self._v[:, :, self._len:new_len] = v
        self._len = new_len
        return self.k, self.v

    def _grow(self, capacity: int) -> None:
        for name in ("_k", "_v"):
            old = getattr(self, name)
            new = np.empty(old.shape[:2] + (capacity,) + old.shape[3:], dtype=old.dtype)
            new[:, :, :self._len] = old[:, :, :self._len]
            setattr(self, name, new)

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (keep the first ``length``)."""
        if not 0 <= length <= self._len:
            raise ValueError(f"cache: can keep 0..{self._len} positions, got {length}")
        self._len = length

    def select(self, rows: np.ndarray) -> None:
        """Keep batch rows ``rows`` (B_new,) in this order (beam search reorders beams)."""
        rows = np.asarray(rows)
        if self._k is not None:
            self._k, self._v = self._k[rows], self._v[rows]
        if self.cross_k is not None:
            self.cross_k, self.cross_v = self.cross_k[rows], self.cross_v[rows]


class KVCache:
    """``n_layers`` slots, one per block of a stack; ``cache[i]`` is layer i's slot.

    max_length: optional bound on the cached sequence length (e.g. the model's context);
    appending past it raises instead of silently growing.
    """

    def __init__(self, n_layers: int, max_length: int | None = None):
        check_positive_int("KVCache: n_layers", n_layers)
        if max_length is not None and max_length < 1:
            raise ValueError(f"KVCache: max_length must be >= 1, got {max_length}")
        self.max_length = max_length
        self.layers = [LayerCache(max_length) for _ in range(n_layers)]

    @property
    def length(self) -> int:
        """Positions cached so far (read before a step: the next position is ``length``)."""
        return self.layers[0].length

    def select(self, rows: np.ndarray) -> None:
        """Reorder/subset the batch of every layer (beam search)."""
        for layer in self.layers:
            layer.select(rows)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` positions of every layer: a position fed only to be
        read once (UniLM's [MASK] of the next token) is dropped after its step."""
        for layer in self.layers:
            layer.truncate(length)

    def reset(self) -> None:
        self.layers = [LayerCache(self.max_length) for _ in self.layers]

    def __getitem__(self, i: int) -> LayerCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)
