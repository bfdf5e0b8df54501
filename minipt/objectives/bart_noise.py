"""BART's five noising functions (Lewis et al. 2020, section 2.2), composable.

The encoder reads the corrupted text; the decoder reconstructs the original, so every
function returns only the new encoder input (the target is the original itself).
- token masking: tokens replaced by [MASK] with probability p;
- token deletion: tokens removed with probability p (the model must find where);
- text infilling: spans with lengths ~ Poisson(lambda = 3) each replaced by ONE [MASK],
  a span of length 0 inserting a [MASK]; spans start until ``mask_ratio`` of the tokens
  are covered (30 % in BART's best setting);
- sentence permutation: sentences (split after ``eos_id`` tokens) shuffled;
- document rotation: the document rotated to start at a random token.
"""
from __future__ import annotations

import numpy as np

from .common import check_ids_array, check_probability


def token_masking(ids, rng: np.random.Generator, mask_id: int, p: float = 0.15) -> np.ndarray:
    ids = check_ids_array("ids", ids, 1)
    check_probability("p", p)
    return np.where(rng.random(len(ids)) < p, mask_id, ids)


def token_deletion(ids, rng: np.random.Generator, p: float = 0.15) -> np.ndarray:
    ids = check_ids_array("ids", ids, 1)
    check_probability("p", p)
    return ids[rng.random(len(ids)) >= p]


def text_infilling(ids, rng: np.random.Generator, mask_id: int, mask_ratio: float = 0.3,
                   poisson_lambda: float = 3.0) -> np.ndarray:
    """Spans replaced by one [MASK] each, until ``mask_ratio`` of the tokens are covered."""
    ids = check_ids_array("ids", ids, 1)
    check_probability("mask_ratio", mask_ratio)
    budget = int(round(len(ids) * mask_ratio))
    covered = np.zeros(len(ids), dtype=bool)
    insert_before: set[int] = set()                 # zero-length spans: a [MASK] inserted here
    span_start: dict[int, int] = {}                 # start -> length of a replaced span
    tries = 0
    while covered.sum() < budget and tries < 100 * (budget + 1):
        tries += 1
        length = int(rng.poisson(poisson_lambda))
        start = int(rng.integers(0, len(ids)))
        if length == 0:
            insert_before.add(start)
            continue
        end = min(start + length, len(ids))
        if covered[max(start - 1, 0):min(end + 1, len(ids))].any():   # keep spans apart
            continue
        covered[start:end] = True
        span_start[start] = end - start
    out, i = [], 0
    while i < len(ids):
        if i in insert_before and not covered[i]:
            out.append(mask_id)
        if i in span_start:
            out.append(mask_id)
            i += span_start[i]
            continue
        out.append(ids[i])
        i += 1
    return np.array(out, dtype=np.int64)


def sentence_permutation(ids, rng: np.random.Generator, eos_id: int) -> np.ndarray:
    """Sentences end at each ``eos_id`` (a trailing piece without one is a sentence too)."""
    ids = check_ids_array("ids", ids, 1)
    ends = np.flatnonzero(ids == eos_id) + 1
    sentences = [s for s in np.split(ids, ends) if len(s)]
    return np.concatenate([sentences[k] for k in rng.permutation(len(sentences))])


def document_rotation(ids, rng: np.random.Generator) -> np.ndarray:
    ids = check_ids_array("ids", ids, 1)
    return np.roll(ids, -int(rng.integers(0, len(ids))))


def compose(*noises):
    """Chain noising functions, each ``f(ids, rng) -> ids`` (bind extra arguments with
    functools.partial), applied left to right."""
    def noised(ids, rng):
        for f in noises:
            ids = f(ids, rng)
        return ids
    return noised
