"""The attention-mask family: boolean "may attend" arrays (True = query row may attend
to key column). One encoder becomes BERT, GPT, a prefix LM or UniLM by its mask alone
(Dong et al. 2019, UniLM; Raffel et al. 2020, T5 Fig. 3).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_positive_int as _positive
from ..ops.attention import combine_masks as combine  # noqa: F401  (the one AND of masks)


def bidirectional(T: int, S: int | None = None) -> np.ndarray:
    """Every position sees every position (BERT, encoders)."""
    _positive("T", T)
    return np.ones((T, T if S is None else S), dtype=bool)                  # (T, S)


def causal(T: int) -> np.ndarray:
    """Left-to-right: position i sees j <= i (GPT, decoders)."""
    _positive("T", T)
    return np.tril(np.ones((T, T), dtype=bool))


def right_to_left(T: int) -> np.ndarray:
    """Right-to-left: position i sees j >= i (UniLM's backward LM, ELMo's backward LM)."""
    _positive("T", T)
    return np.triu(np.ones((T, T), dtype=bool))


def prefix(T: int, prefix_len: int) -> np.ndarray:
    """Prefix LM / seq2seq: the first ``prefix_len`` positions see each other fully; the
    rest see the whole prefix and causally themselves (UniLM seq2seq, T5's prefix LM)."""
    _positive("T", T)
    if not 0 <= prefix_len <= T:
        raise ValueError(f"prefix_len must be in [0, {T}], got {prefix_len}")
    m = causal(T)
    m[:, :prefix_len] = True
    return m


def seq2seq(src_len: int, tgt_len: int) -> np.ndarray:
    """UniLM's seq2seq mask over [source; target]: source sees source, target sees the
    source and the target to its left."""
    _positive("tgt_len", tgt_len)
    return prefix(src_len + tgt_len, src_len)


def padding(lengths, T: int, *, queries: bool = False) -> np.ndarray:
    """Key padding (B, 1, T): key j of sequence b is real when j < lengths[b]. With
    ``queries=True`` the full (B, T, T) mask also blanks padded query rows."""
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or np.any(lengths < 0) or np.any(lengths > T):
        raise ValueError(f"lengths must be a 1-D array of values in [0, {T}], got {lengths.tolist()}")
    real = np.arange(T)[None, :] < lengths[:, None]                         # (B, T)
    if queries:
        return real[:, :, None] & real[:, None, :]                          # (B, T, T)
    return real[:, None, :]                                                 # (B, 1, T)


def banded(T: int, window: int, S: int | None = None) -> np.ndarray:
    """Locally banded causal: position i sees i - window < j <= i (GPT-3's sparse layers,
    after Child et al. 2019). With S > T keys (a KV cache), queries are the last T positions."""
    _positive("T", T)
    _positive("window", window)
    S = T if S is None else S
    i, j = np.arange(T)[:, None] + (S - T), np.arange(S)[None, :]
    return (j <= i) & (j > i - window)                                      # (T, S)


def from_matrix(m) -> np.ndarray:
    """An arbitrary may-attend matrix (permutation LMs, GLM), checked to be boolean (T, S)
    or (B, T, S)."""
    m = np.asarray(m)
    if m.dtype != np.bool_:
        raise TypeError(f"a may-attend matrix must be boolean, got {m.dtype}")
    if m.ndim not in (2, 3):
        raise ValueError(f"a may-attend matrix must be (T, S) or (B, T, S), got shape {m.shape}")
    return m
