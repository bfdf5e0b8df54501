"""T5's span corruption (Raffel et al. 2020, section 3.1.4 and 3.3.4).

Choose about ``noise_density`` (15 %) of the tokens as noise, in spans of mean length
``mean_span`` (3): the number of spans is round(n_noise / mean_span), and the noise and
non-noise lengths are each split into that many positive parts at random (T5's
random_spans_noise_mask). Each noise span is replaced in the input by one sentinel
<extra_id_0>, <extra_id_1>, ...; the target lists each sentinel followed by the tokens it
replaced, and ends with one more sentinel.
"""
from __future__ import annotations

import numpy as np

from .common import check_ids_array, check_probability


def _random_partition(total: int, parts: int, rng: np.random.Generator) -> np.ndarray:
    """``total`` split into ``parts`` positive integers, uniformly over compositions."""
    cuts = np.sort(rng.choice(np.arange(1, total), size=parts - 1, replace=False)) if parts > 1 else []
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(np.int64)


def random_spans_noise_mask(length: int, rng: np.random.Generator, noise_density: float = 0.15,
                            mean_span: float = 3.0) -> np.ndarray:
    """Boolean (length,) mask, True on noise; spans alternate non-noise, noise, ..."""
    check_probability("noise_density", noise_density)
    if not mean_span >= 1:
        raise ValueError(f"mean_span must be >= 1, got {mean_span}")
    if length < 2:
        raise ValueError(f"span corruption needs at least 2 tokens, got {length}")
    n_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    n_spans = max(int(round(n_noise / mean_span)), 1)
    n_spans = min(n_spans, n_noise, length - n_noise)
    noise = _random_partition(n_noise, n_spans, rng)
    keep = _random_partition(length - n_noise, n_spans, rng)
    mask = np.zeros(length, dtype=bool)
    pos = 0
    for k, n in zip(keep, noise):
        pos += k
        mask[pos:pos + n] = True
        pos += n
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
