import numpy as np
import pytest

from minipt.objectives import IGNORE
from minipt.objectives.electra import discriminator_inputs, generator_inputs
from minipt.objectives.span_masking import (
    entity_masking,
    span_masking,
    whole_word_masking,
)

MASK = 1
RANDOM = np.arange(10, 50)


def test_whole_words_are_masked_together():
    rng = np.random.default_rng(0)
    ids = np.arange(10, 70)
    starts = np.zeros(60, dtype=bool)
    starts[::3] = True                               # 20 words of 3 pieces
    for _ in range(100):
        _, tgt = whole_word_masking(ids, starts, rng, mask_id=MASK, random_ids=RANDOM)
        chosen = (tgt != IGNORE).reshape(20, 3)
        assert (chosen.all(1) | ~chosen.any(1)).all() and chosen.sum() == 9   # 15 % of 60, in words


def test_spanbert_spans_cover_the_budget_and_are_long():
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(300):
        _, tgt = span_masking(np.arange(10, 210), rng, mask_id=MASK, random_ids=RANDOM)
        chosen = tgt != IGNORE
        assert 30 <= chosen.sum() <= 30 + 10
        edges = np.diff(np.concatenate([[0], chosen.astype(int), [0]]))
        runs += list(np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1))
    assert np.mean(runs) > 2.5                       # spans, not single tokens (geometric mean 3.8, merged)


def test_entity_masking_uses_given_spans():
    _, tgt = entity_masking(np.arange(10, 30), [(2, 5), (8, 10), (15, 18)], np.random.default_rng(0),
                            mask_id=MASK, random_ids=RANDOM)
    chosen = np.flatnonzero(tgt != IGNORE)
    assert set(chosen) <= {2, 3, 4, 8, 9, 15, 16, 17} and len(chosen) >= 3
    with pytest.raises(ValueError, match="does not fit"):
        entity_masking(np.arange(5), [(3, 9)], np.random.default_rng(0), mask_id=MASK, random_ids=RANDOM)


def test_electra_labels():
    rng = np.random.default_rng(0)
    ids = rng.integers(10, 50, (8, 32))
    inputs, targets = generator_inputs(ids, rng, mask_id=MASK, vocab_size=50, special_ids=(0,))
    masked = targets != IGNORE
    assert (inputs[masked] == MASK).all()
    samples = np.where(rng.random(ids.shape) < 0.5, ids, rng.integers(10, 50, ids.shape))
    disc, labels = discriminator_inputs(ids, targets, samples)
    assert not labels[~masked].any() and np.array_equal(labels.astype(bool), disc != ids)
    assert (labels[masked & (samples == ids)] == 0).all()      # a correct guess counts as original
