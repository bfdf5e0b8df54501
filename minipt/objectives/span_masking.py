"""Masking whole units instead of single tokens: whole words (BERT's later release),
SpanBERT's geometric spans (Joshi et al. 2020) and ERNIE's phrases and entities (Sun et
al. 2019). The units are chosen until about ``mask_prob`` of the tokens are covered;
every token of a chosen unit gets BERT's 80/10/10 treatment, and the choice is made
once per unit (SpanBERT, section 3.1: "we perform this replacement at the span level and
not for each token individually"): a unit becomes all [MASK], all random tokens, or stays
as it is. The rule itself is ``mlm.replacement_choice``. SpanBERT's sampled spans that
overlap or touch are merged first, so one visible span is one unit; given words and
entities stay separate units even when they touch."""
from __future__ import annotations

import numpy as np

from .common import IGNORE, check_ids_array, check_probability
from .mlm import replacement_choice

Unit = tuple[int, int]                   # [start, end) token positions


def _apply(ids: np.ndarray, units: list[Unit], rng: np.random.Generator, mask_id: int, random_ids: np.ndarray):
    """ids (T,), chosen units -> (inputs, targets) (T,) each, one 80/10/10 choice per unit."""
    inputs = ids.copy()
    chosen = np.zeros(len(ids), dtype=bool)                                   # (T,)
    to_mask, to_random = replacement_choice(rng.random(len(units)))           # (units,) each
    for (s, e), masked, randomised in zip(units, to_mask, to_random):
        chosen[s:e] = True
        if masked:
            inputs[s:e] = mask_id
        elif randomised:                                                      # a random token per position
            inputs[s:e] = random_ids[rng.integers(0, len(random_ids), e - s)]
    return inputs, np.where(chosen, ids, IGNORE)


def _merge(units: list[Unit], touching: bool) -> list[Unit]:
    """Sorted units with overlapping ones (and, if ``touching``, adjacent ones) joined."""
    merged: list[list[int]] = []
    for s, e in sorted(units):
        if merged and (s < merged[-1][1] or (touching and s == merged[-1][1])):
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _cover(units: list[Unit], n: int, budget: int, rng) -> list[Unit]:
    """Units taken in random order until ``budget`` of the ``n`` tokens are covered."""
    chosen = np.zeros(n, dtype=bool)
    taken = []
    for k in rng.permutation(len(units)):
        if chosen.sum() >= budget:
            break
        s, e = units[k]
        chosen[s:e] = True
        taken.append((s, e))
    return _merge(taken, touching=False)


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
    spans = []
    for _ in range(100 * (budget + 1)):
        if chosen.sum() >= budget:
            break
        length = min(int(rng.geometric(p)), max_span, len(ids))
        start = int(rng.integers(0, len(ids) - length + 1))
        chosen[start:start + length] = True
        spans.append((start, start + length))
    return _apply(ids, _merge(spans, touching=True), rng, mask_id, np.asarray(random_ids))


def entity_masking(ids, spans: list[tuple[int, int]], rng: np.random.Generator, *, mask_id: int, random_ids,
                   mask_prob: float = 0.15):
    """ERNIE: mask whole given phrases/entities (start, end) until the budget is met."""
    ids = check_ids_array("ids", ids, 1)
    for s, e in spans:
        if not 0 <= s < e <= len(ids):
            raise ValueError(f"span ({s}, {e}) does not fit a sequence of {len(ids)} tokens")
    chosen = _cover(list(spans), len(ids), int(round(mask_prob * len(ids))), rng)
    return _apply(ids, chosen, rng, mask_id, np.asarray(random_ids))
