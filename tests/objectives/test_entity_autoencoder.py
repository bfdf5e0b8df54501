"""Knowledge batches: alignments point at the mention's token, dEA corrupts about 5 %
and masks about 15 % of alignments and labels every aligned token, entity masking masks
whole names, and bad input is refused."""
import numpy as np
import pytest

from minipt.data.toy_kb import Mention, build_kb, corpus
from minipt.objectives.common import IGNORE
from minipt.objectives.entity_autoencoder import make_batch, vocabulary


def test_alignments_and_labels():
    kb = build_kb()
    sents = corpus(kb, 50, seed=0)
    b = make_batch(sents, kb, np.random.default_rng(0), masking="none", dea=False)
    vocab = vocabulary(kb)
    assert (b.entity_labels == IGNORE).all() and (b.mlm_labels == IGNORE).all()
    for i, s in enumerate(sents):
        assert b.entity_mask[i].sum() == len(s.spans)
        for m, (start, _, e) in enumerate(s.spans):
            assert b.entities[i, m] == e
            assert vocab[b.ids[i, b.positions[i, m]]] == kb.names[e]


def test_dea_rates_and_targets():
    kb = build_kb()
    sents = corpus(kb, 4000, seed=1)
    clean = make_batch(sents, kb, np.random.default_rng(0), masking="none", dea=False)
    b = make_batch(sents, kb, np.random.default_rng(1), masking="none", dea=True)
    real = clean.entity_mask > 0
    masked = real & (b.entity_mask == 0)
    swapped = real & (b.entity_mask > 0) & (b.entities != clean.entities)
    assert 0.12 < masked.sum() / real.sum() < 0.18
    assert 0.02 < swapped.sum() / real.sum() < 0.07          # a random draw may hit the same entity
    bm, mm = np.nonzero(real)
    np.testing.assert_array_equal(b.entity_labels[bm, clean.positions[bm, mm]], clean.entities[bm, mm])
    assert (b.entity_labels != IGNORE).sum() == real.sum()


def test_entity_masking_masks_whole_names_first():
    kb = build_kb()
    sents = corpus(kb, 400, seed=2)
    names = set(kb.names)
    vocab = vocabulary(kb)
    share = {}
    for kind in ("token", "entity"):
        b = make_batch(sents, kb, np.random.default_rng(3), masking=kind, dea=False)
        picked = b.mlm_labels != IGNORE
        share[kind] = np.mean([vocab[t] in names for t in b.mlm_labels[picked]])
        assert 0.10 < picked.sum() / (b.token_mask.sum() - 2 * len(sents)) < 0.25
    assert share["entity"] > share["token"] + 0.2, share


def test_bad_input():
    kb = build_kb()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="masking must be"):
        make_batch(corpus(kb, 2), kb, rng, masking="span")
    with pytest.raises(ValueError, match="at least one sentence"):
        make_batch([], kb, rng)
    with pytest.raises(ValueError, match="outside the knowledge-base vocabulary"):
        make_batch([Mention(("zorblax", "sleeps", "."), ())], kb, rng)
    with pytest.raises(ValueError, match="entity ids must be"):
        make_batch([Mention(("sleeps", "."), ((0, 1, 99),))], kb, rng)
    b = make_batch([Mention(("the", "cat", "sleeps", "."), ())], kb, rng)     # no entity: documented, padded
    assert b.entities.shape == (1, 1) and b.entity_mask.sum() == 0 and (b.entity_labels == IGNORE).all()
