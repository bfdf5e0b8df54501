"""Random spans, shared by T5's span corruption (``t5_span.py``), BART's text infilling
(``bart_noise.py``) and GLM's blanks (``permutation.py``), and the packing of short texts
into longer pieces that T5 pre-trains on.

- ``random_partition(total, parts, rng)``: ``total`` split into ``parts`` positive
  integers, every composition equally likely (T5's random segmentation of the noise,
  Raffel et al. 2020, Sec. 3.1.4);
- ``place_spans(lengths, total, rng, min_gap)``: where spans of the given lengths start,
  left to right, at least ``min_gap`` tokens apart, every such placement equally likely.
  Stars and bars: F = total - sum(lengths) - min_gap (k - 1) free tokens go into k + 1
  gaps (before, between and after the k spans); choosing k distinct numbers
  c_0 < ... < c_{k-1} from 0 .. F + k - 1 gives span i the c_i - i free tokens before it,
  a one-to-one map between the two, so each placement has the same chance. The first
  and last gaps may be empty: a span is as likely at the end as anywhere else;
- ``pack_pieces(texts, length, rng, encode)``: random texts joined until ``length``
  tokens and cut there (T5 concatenates and splits its C4 texts the same way), so that
  one input is long enough for several spans.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core.checks import check_positive_int


def random_partition(total: int, parts: int, rng: np.random.Generator) -> np.ndarray:
    """(parts,) positive integers summing to ``total``, uniformly over compositions."""
    if not 1 <= parts <= total:
        raise ValueError(f"cannot split {total} into {parts} positive parts")
    cuts = np.sort(rng.choice(np.arange(1, total), size=parts - 1, replace=False))   # (parts - 1,)
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(np.int64)


def place_spans(lengths, total: int, rng: np.random.Generator, min_gap: int = 1) -> np.ndarray:
    """Start (k,) of spans ``lengths`` (k,) in order, within ``total`` tokens, at least
    ``min_gap`` apart, uniformly over all such placements (see the module docstring)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    k = len(lengths)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if np.any(lengths < 1) or min_gap < 0:
        raise ValueError(f"span lengths must be >= 1 and min_gap >= 0, got {lengths.tolist()} and {min_gap}")
    free = total - int(lengths.sum()) - min_gap * (k - 1)
    if free < 0:
        raise ValueError(f"{k} spans of {int(lengths.sum())} tokens, {min_gap} apart, do not fit in {total} tokens")
    c = np.sort(rng.choice(free + k, size=k, replace=False))                          # (k,) slots
    before = np.concatenate([[0], np.cumsum(lengths[:-1] + min_gap)])                 # spans and gaps before i
    return (c - np.arange(k) + before).astype(np.int64)


def pack_pieces(texts: Sequence[str], length: int, rng: np.random.Generator,
                encode: Callable[[str], list[int]]) -> np.ndarray:
    """Random ``texts`` (encoded by ``encode``) joined until ``length`` tokens, cut there
    -> ids (length,)."""
    check_positive_int("length", length)
    if not texts:
        raise ValueError("packing needs at least one text")
    ids: list[int] = []
    while len(ids) < length:
        piece = encode(texts[int(rng.integers(len(texts)))])
        if not piece:
            raise ValueError("packing met an empty text (it encodes to no tokens)")
        ids += piece
    return np.array(ids[:length], dtype=np.int64)
