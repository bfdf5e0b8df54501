"""Masking whole units instead of single tokens: whole words (BERT's later release),
SpanBERT's geometric spans (Joshi et al. 2020) and ERNIE's phrases and entities (Sun et
al. 2019). The units are chosen until about ``mask_prob`` of the tokens are covered;
every token of a chosen unit gets BERT's 80/10/10 treatment (the choice is made per
unit, as in SpanBERT)."""
from __future__ import annotations

import numpy as np

from .common import IGNORE, check_ids_array, check_probability


def _apply(ids, chosen, rng, mask_id, random_ids):
    inputs = ids.copy()
    action = rng.random(len(ids))
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[to_mask] = mask_id
    inputs[to_random] = random_ids[rng.integers(0, len(random_ids), int(to_random.sum()))]
    return inputs, np.where(chosen, ids, IGNORE)


def _cover(units: list[tuple[int, int]], n: int, budget: int, rng) -> np.ndarray:
    chosen = np.zeros(n, dtype=bool)
    for k in rng.permutation(len(units)):
        if chosen.sum() >= budget:
            break
        s, e = units[k]
        chosen[s:e] = True
    return chosen


def whole_word_masking(ids, word_starts, rng: np.random.Generator, *, mask_id: int, random_ids,
                       mask_prob: float = 0.15):
    """word_starts (T,) bool: True where a word begins (its pieces follow)."""
    ids = check_ids_array("ids", ids, 1)
    check_probability("mask_prob", mask_prob)
    starts = list(np.flatnonzero(word_starts)) + [len(ids)]
    units = [(starts[k], starts[k + 1]) for k in range(len(starts) - 1)]
    chosen = _cover(units, len(ids), int(round(mask_prob * len(ids))), rng)
    return _apply(ids, chosen, rng, mask_id, np.asarray(random_ids))


def span_masking(ids, rng: np.random.Generator, *, mask_id: int, random_ids, mask_prob: float = 0.15,
                 p: float = 0.2, max_span: int = 10):
    """SpanBERT: span lengths ~ Geometric(p) clipped at ``max_span`` (mean 3.8 for p 0.2)."""
    ids = check_ids_array("ids", ids, 1)
    check_probability("mask_prob", mask_prob)
    budget = int(round(mask_prob * len(ids)))
    chosen = np.zeros(len(ids), dtype=bool)
    for _ in range(100 * (budget + 1)):
        if chosen.sum() >= budget:
            break
        length = min(int(rng.geometric(p)), max_span, len(ids))
        start = int(rng.integers(0, len(ids) - length + 1))
        chosen[start:start + length] = True
    return _apply(ids, chosen, rng, mask_id, np.asarray(random_ids))


def entity_masking(ids, spans: list[tuple[int, int]], rng: np.random.Generator, *, mask_id: int, random_ids,
                   mask_prob: float = 0.15):
    """ERNIE: mask whole given phrases/entities (start, end) until the budget is met."""
    ids = check_ids_array("ids", ids, 1)
    for s, e in spans:
        if not 0 <= s < e <= len(ids):
            raise ValueError(f"span ({s}, {e}) does not fit a sequence of {len(ids)} tokens")
    chosen = _cover(list(spans), len(ids), int(round(mask_prob * len(ids))), rng)
    return _apply(ids, chosen, rng, mask_id, np.asarray(random_ids))
