"""BART's five noising functions (Lewis et al. 2020, section 2.2), composable.

The encoder reads the corrupted text; the decoder reconstructs the original, so every
function returns only the new encoder input (the target is the original itself).
- token masking: tokens replaced by [MASK] with probability p;
- token deletion: tokens removed with probability p (the model must find where);
- text infilling: spans with lengths ~ Poisson(lambda = 3) each replaced by ONE [MASK],
  a span of length 0 inserting a [MASK]; lengths are drawn until they cover
  ``mask_ratio`` of the tokens (30 % in BART's best setting), and the spans are placed
  uniformly at random (``spans.place_spans``). On a short text the budget cuts the
  spans short (3 tokens of 10): pack texts into longer pieces for the paper's lengths;
- sentence permutation: sentences (split after ``eos_id`` tokens) shuffled;
- document rotation: the document rotated to start at a random token.
"""
from __future__ import annotations

import numpy as np

from .common import check_ids_array, check_probability
from .spans import place_spans


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
    """Span lengths drawn from Poisson(``poisson_lambda``) until they add up to
    round(``mask_ratio`` * T), the last one cut to that sum (as BART's own code does); the
    spans of length >= 1 go at random places, apart (``spans.place_spans``), each
    replaced by one [MASK]; each span of length 0 inserts one [MASK] at a random place (distinct places)."""
    ids = check_ids_array("ids", ids, 1)
    check_probability("mask_ratio", mask_ratio)
    budget = int(round(len(ids) * mask_ratio))
    lengths: list[int] = []
    while sum(lengths) < budget:
        lengths.append(int(rng.poisson(poisson_lambda)))
    if lengths:
        lengths[-1] -= sum(lengths) - budget                       # the last span cut to the budget
    spans = rng.permutation(np.array([n for n in lengths if n > 0], dtype=np.int64))   # the cut one anywhere
    gap = 1 if budget + len(spans) - 1 <= len(ids) else 0           # apart, where they fit apart
    starts = place_spans(spans, len(ids), rng, min_gap=gap)
    n_out = len(ids) - budget + len(spans)
    n_insert = len(lengths) - len(spans)
    inserts = rng.choice(n_out + 1, size=n_insert, replace=n_insert > n_out + 1)   # distinct places
    return infill(ids, starts, spans, inserts, mask_id)


def infill(ids, starts, lengths, inserts, mask_id: int) -> np.ndarray:
    """ids (T,) with the spans ``starts``/``lengths`` (non-overlapping) each replaced by one
    ``mask_id``, then one more ``mask_id`` put before position j of that result for each j
    in ``inserts`` (j = its length: at the end)."""
    ids = check_ids_array("ids", ids, 1)
    out, i = [], 0
    span_at = dict(zip(np.asarray(starts).tolist(), np.asarray(lengths).tolist()))
    while i < len(ids):
        if i in span_at:
            out.append(mask_id)
            i += span_at[i]
        else:
            out.append(int(ids[i]))
            i += 1
    for j in sorted(np.asarray(inserts).tolist(), reverse=True):   # from the right: earlier places hold
        if not 0 <= j <= len(out):
            raise ValueError(f"insert position {j} is outside 0..{len(out)}")
        out.insert(j, mask_id)
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
