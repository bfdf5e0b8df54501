import functools

import numpy as np
import pytest

from minipt.objectives.bart_noise import (
    compose,
    document_rotation,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)
from minipt.objectives.sentence_pairs import (
    next_sentence_prediction,
    sentence_order_prediction,
)

MASK, EOS = 1, 2


def within(count, n, p):
    return abs(count - n * p) <= 5 * np.sqrt(n * p * (1 - p))


def test_token_masking_and_deletion_rates():
    rng = np.random.default_rng(0)
    ids = rng.integers(10, 50, 20_000)
    assert within((token_masking(ids, rng, MASK, 0.15) == MASK).sum(), ids.size, 0.15)
    assert within(ids.size - len(token_deletion(ids, rng, 0.15)), ids.size, 0.15)


def test_text_infilling_spans_are_poisson_3_and_one_mask_each():
    """Each replaced span shrinks the text by (length - 1); zero-length spans add a mask.
    Over many documents the masked share approaches the 30 % budget."""
    rng = np.random.default_rng(0)
    covered, n = 0, 0
    for _ in range(200):
        ids = np.arange(10, 110)
        out = text_infilling(ids, rng, MASK, mask_ratio=0.3)
        kept = out[out != MASK]
        assert np.all(np.diff(kept) > 0)                 # the unmasked tokens keep their order
        covered += 100 - len(kept)
        n += 100
    assert 0.29 <= covered / n <= 0.33


def test_sentence_permutation_and_rotation_are_permutations():
    rng = np.random.default_rng(0)
    ids = np.array([5, 6, EOS, 7, EOS, 8, 9, 9, EOS])
    perm = sentence_permutation(ids, rng, EOS)
    assert sorted(perm.tolist()) == sorted(ids.tolist()) and perm[-1] == EOS
    rot = document_rotation(ids, rng)
    assert any(np.array_equal(rot, np.roll(ids, -k)) for k in range(len(ids)))
    noise = compose(functools.partial(sentence_permutation, eos_id=EOS), document_rotation)
    assert sorted(noise(ids, rng).tolist()) == sorted(ids.tolist())


def test_nsp_and_sop_balance_and_layout():
    rng = np.random.default_rng(0)
    docs = [[[10 + d, 20 + s] for s in range(4)] for d in range(5)]
    labels = []
    for _ in range(4000):
        ids, seg, label = next_sentence_prediction(docs, rng, cls_id=3, sep_id=4)
        assert ids[0] == 3 and ids[3] == 4 and ids[-1] == 4 and seg.tolist() == [0, 0, 0, 0, 1, 1, 1]
        if label == 1:
            assert ids[5] == ids[2] + 1 and ids[4] == ids[1]    # the next sentence of the same doc
        labels.append(label)
    assert within(sum(labels), 4000, 0.5)
    sop = [sentence_order_prediction(docs, rng, 3, 4) for _ in range(4000)]
    assert within(sum(s[2] for s in sop), 4000, 0.5)
    assert all((s[0][2] < s[0][5]) == (s[2] == 1) for s in sop)  # swapped exactly when label 0


def test_a_notnext_sentence_always_comes_from_another_document():
    # every token names its document (100 d + s), so B's document is readable from B
    rng = np.random.default_rng(0)
    docs = [[[100 * d + s] for s in range(3)] for d in range(3)]
    seen = 0
    for _ in range(600):
        ids, _, label = next_sentence_prediction(docs, rng, cls_id=1, sep_id=2)
        a, b = int(ids[1]), int(ids[3])
        if label == 0:
            assert b // 100 != a // 100, (a, b)
            seen += 1
        else:
            assert b == a + 1
    assert seen > 200


def test_bad_input():
    with pytest.raises(ValueError, match="p must be"):
        token_masking(np.arange(5), np.random.default_rng(0), MASK, p=2.0)
    with pytest.raises(ValueError, match="consecutive sentences"):
        sentence_order_prediction([[[1, 2]]], np.random.default_rng(0), 3, 4)
    with pytest.raises(ValueError, match="two documents"):
        next_sentence_prediction([[[1], [2]]], np.random.default_rng(0), 3, 4)
