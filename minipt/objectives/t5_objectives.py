"""The unsupervised objectives of T5's study for an encoder-decoder (Raffel et al. 2020,
"Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer",
Sec. 3.3, Tables 3-7), each ``ids (T,) -> (encoder input, decoder target)``, both 1-D:

- ``prefix_lm_pair``: a split point uniform in [1, T - 1]; the input is the text before
  it, the target the rest ("prefix language modeling", Sec. 3.3.1);
- ``bert_style``: BERT's 80/10/10 corruption of a ``rate`` share of the tokens
  (``mlm.mask_tokens``); the target is the WHOLE original text ("BERT-style",
  reconstructing the uncorrupted input, Sec. 3.3.1);
- ``deshuffling``: the tokens shuffled; the target is the original order (Sec. 3.3.1);
- ``iid_sentinel_masking``: each token is noise with probability ``rate``, i.i.d.; each
  run of noise becomes one sentinel and the target is the sentinels with the dropped
  tokens ("replace corrupted spans", Sec. 3.3.2; ``t5_span.sentinel_corruption``);
- span corruption with a mean span length is ``t5_span.span_corruption``.

No parameters: these only build (input, target) pairs.
"""
from __future__ import annotations

import numpy as np

from .common import check_ids_array, check_probability
from .mlm import mask_tokens
from .t5_span import sentinel_corruption


def _check_length(ids, need: int, what: str) -> np.ndarray:
    ids = check_ids_array("ids", ids, 1)
    if len(ids) < need:
        raise ValueError(f"{what} needs at least {need} tokens, got {len(ids)}")
    return ids


def prefix_lm_pair(ids, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """ids (T,) -> (ids[:k], ids[k:]) with k uniform in [1, T - 1]."""
    ids = _check_length(ids, 2, "prefix LM")
    k = int(rng.integers(1, len(ids)))
    return ids[:k].copy(), ids[k:].copy()


def bert_style(ids, rng: np.random.Generator, *, mask_id: int, vocab_size: int, rate: float = 0.15,
               special_ids=()) -> tuple[np.ndarray, np.ndarray]:
    """ids (T,) -> (BERT-corrupted ids (T,), the original ids (T,))."""
    ids = _check_length(ids, 1, "BERT-style denoising")
    inputs, _ = mask_tokens(ids, rng, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids,
                            mask_prob=rate)
    return inputs, ids.copy()


def deshuffling(ids, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """ids (T,) -> (a random permutation of ids, ids)."""
    ids = _check_length(ids, 1, "deshuffling")
    return ids[rng.permutation(len(ids))], ids.copy()


def iid_sentinel_masking(ids, rng: np.random.Generator, sentinel_ids, rate: float = 0.15
                         ) -> tuple[np.ndarray, np.ndarray]:
    """ids (T,) -> (input with each run of i.i.d. noise as one sentinel, sentinel target).
    At least one token is noise and at least one is kept."""
    ids = _check_length(ids, 2, "i.i.d. masking")
    check_probability("rate", rate)
    mask = rng.random(len(ids)) < rate                                        # (T,)
    if not mask.any():
        mask[int(rng.integers(len(ids)))] = True
    if mask.all():
        mask[int(rng.integers(len(ids)))] = False
    return sentinel_corruption(ids, mask, sentinel_ids)
