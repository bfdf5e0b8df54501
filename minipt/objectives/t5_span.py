"""T5's span corruption (Raffel et al. 2020, section 3.1.4 and 3.3.4).

Choose about ``noise_density`` (15 %) of the tokens as noise, in spans of mean length
``mean_span`` (3): n_noise = round(length * noise_density) and the number of spans is
round(n_noise / mean_span); the noise is split into that many positive lengths at random
(T5's random segmentation, ``spans.random_partition``) and the spans are placed among
the non-noise tokens at random, apart from each other (``spans.place_spans``). T5's
reference code splits the non-noise into as many parts as the noise and interleaves
them starting with non-noise, so its last token is always noise; here the first and last
non-noise parts may be empty, so every placement is equally likely and a span covers the
last token no more often than any other place. Each noise span is replaced in the input
by one sentinel <extra_id_0>, <extra_id_1>, ... in order of position; the target lists
each sentinel followed by the tokens it replaced, and ends with one more sentinel.

On short texts this gives one span (round(8 * 0.15) = 1 token of noise in an 8-token
sentence): pack texts into longer pieces first (``spans.pack_pieces``), as T5 does.
"""
from __future__ import annotations

import numpy as np

from .common import check_ids_array, check_probability
from .spans import place_spans, random_partition


def random_spans_noise_mask(length: int, rng: np.random.Generator, noise_density: float = 0.15,
                            mean_span: float = 3.0) -> np.ndarray:
    """Boolean (length,) mask, True on noise: separate spans placed uniformly at random."""
    check_probability("noise_density", noise_density)
    if not mean_span >= 1:
        raise ValueError(f"mean_span must be >= 1, got {mean_span}")
    if length < 2:
        raise ValueError(f"span corruption needs at least 2 tokens, got {length}")
    n_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    n_spans = max(int(round(n_noise / mean_span)), 1)
    n_spans = min(n_spans, n_noise, length - n_noise + 1)          # k spans need k - 1 tokens between them
    lengths = random_partition(n_noise, n_spans, rng)              # (k,)
    mask = np.zeros(length, dtype=bool)
    for start, n in zip(place_spans(lengths, length, rng, min_gap=1), lengths):
        mask[start:start + n] = True
    return mask


def span_corruption(ids, rng: np.random.Generator, sentinel_ids, noise_density: float = 0.15,
                    mean_span: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """ids (T,) -> (encoder input, decoder target), both 1-D. ``sentinel_ids[k]`` is the id
    of <extra_id_k>; there must be one more sentinel than spans."""
    ids = check_ids_array("ids", ids, 1)
    return sentinel_corruption(ids, random_spans_noise_mask(len(ids), rng, noise_density, mean_span), sentinel_ids)


def sentinel_corruption(ids, mask, sentinel_ids) -> tuple[np.ndarray, np.ndarray]:
    """ids (T,) and a boolean noise mask (T,) -> (input, target): each run of noise becomes
    one sentinel in the input; the target lists each sentinel and the tokens it replaced,
    then one more sentinel (shared by span corruption and T5's i.i.d. "replace corrupted
    spans", ``t5_objectives.py``)."""
    ids = check_ids_array("ids", ids, 1)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != ids.shape:
        raise ValueError(f"noise mask shape {mask.shape} does not match ids {ids.shape}")
    starts = np.flatnonzero(mask & ~np.concatenate([[False], mask[:-1]]))       # first token of each span
    if len(starts) + 1 > len(sentinel_ids):
        raise ValueError(f"{len(starts)} spans need {len(starts) + 1} sentinel ids, got {len(sentinel_ids)}")
    span_index = np.cumsum(np.isin(np.arange(len(ids)), starts)) - 1            # span number per position
    inputs, targets = [], []
    for i, tok in enumerate(ids):
        if not mask[i]:
            inputs.append(tok)
        elif i in starts:
            inputs.append(sentinel_ids[span_index[i]])
            targets += [sentinel_ids[span_index[i]], tok]
        else:
            targets.append(tok)
    targets.append(sentinel_ids[len(starts)])
    return np.array(inputs, dtype=np.int64), np.array(targets, dtype=np.int64)
