"""The objectives' finer claims, each against the docstring that makes it:

- BART text infilling (Lewis et al. 2020, sec. 2.2): each span becomes exactly ONE [MASK],
  a span of length 0 inserts one; checked over many random documents from the output
  alone (its exact layout and its distribution: ``test_span_distributions.py``);
- BART sentence permutation: whole sentences are shuffled, each kept intact;
- ERNIE entity masking (Sun et al. 2019): whole entities, never part of one;
- SpanBERT (Joshi et al. 2020, sec. 3.1: "we perform this replacement at the span level
  and not for each token individually"): one 80/10/10 choice per span (per word, per
  entity), statistically against 5-sigma binomial bounds.

Ids are drawn so that every outcome is readable from the output: originals 100..299,
random replacements 10..49, [MASK] 1."""
import numpy as np

from minipt.objectives import IGNORE
from minipt.objectives.bart_noise import sentence_permutation, text_infilling
from minipt.objectives.span_masking import (
    entity_masking,
    span_masking,
    whole_word_masking,
)

MASK, EOS = 1, 2
RANDOM = np.arange(10, 50)


def within(count, n, p):
    return abs(count - n * p) <= 5 * np.sqrt(n * p * (1 - p))


# -- BART text infilling (the exact layout: test_span_distributions.test_infill_layout_exactly) ------------
def test_text_infilling_from_the_output_alone():
    """Kept tokens stay in order; every gap of removed tokens holds one [MASK] (or two:
    its span's and a length-0 span's right after it); where nothing was removed at most
    one [MASK] was inserted. Masking each token of a span would put len(span) there."""
    rng = np.random.default_rng(0)
    gaps, masks_in_gaps = 0, 0
    for _ in range(300):
        ids = np.arange(100, 160)
        out = text_infilling(ids, rng, MASK, mask_ratio=0.3)
        kept = out[out != MASK]
        assert np.all(np.diff(kept) > 0) and set(kept) <= set(ids)
        # masks standing between kept token a and the next kept token b (and at both ends)
        bounds = np.concatenate([[99], kept, [160]])
        where = np.flatnonzero(out != MASK)
        slots = np.diff(np.concatenate([[-1], where, [len(out)]])) - 1     # masks before each kept token, and after
        for removed, masks in zip(np.diff(bounds) - 1, slots):
            if removed:
                gaps += 1
                masks_in_gaps += masks
                assert 1 <= masks <= 2, (removed, masks)
            else:
                assert masks <= 1
    assert gaps > 1000 and masks_in_gaps < 1.2 * gaps


# -- BART sentence permutation ---------------------------------------------------------------------
def sentences(ids):
    ends = np.flatnonzero(np.asarray(ids) == EOS) + 1
    return [tuple(s) for s in np.split(np.asarray(ids), ends) if len(s)]


def test_sentence_permutation_keeps_every_sentence_whole():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 7))
        doc = np.concatenate([np.append(rng.integers(100, 300, int(rng.integers(1, 6))), EOS) for _ in range(n)])
        out = sentence_permutation(doc, rng, EOS)
        assert sorted(sentences(out)) == sorted(sentences(doc))


def test_sentence_permutation_draws_every_order_evenly():
    doc = np.array([100, 101, EOS, 102, EOS, 103, 104, 105, EOS])
    rng = np.random.default_rng(1)
    orders = {}
    for _ in range(1200):
        key = tuple(s[0] for s in sentences(sentence_permutation(doc, rng, EOS)))
        orders[key] = orders.get(key, 0) + 1
    assert len(orders) == 6 and all(within(c, 1200, 1 / 6) for c in orders.values())


def test_sentence_permutation_moves_a_trailing_piece_whole():
    doc = np.array([100, 101, EOS, 102, 103])                       # the last sentence has no EOS
    rng = np.random.default_rng(2)
    seen = {tuple(sentence_permutation(doc, rng, EOS).tolist()) for _ in range(50)}
    assert seen == {(100, 101, EOS, 102, 103), (102, 103, 100, 101, EOS)}


# -- whole units: what is chosen, and one 80/10/10 choice per unit ------------------------------------
def outcome(ids, inputs, s, e):
    """'mask', 'random' or 'keep' for a unit ids[s:e], or 'mixed' if its tokens differ."""
    kinds = set()
    for a, b in zip(ids[s:e], inputs[s:e]):
        kinds.add("mask" if b == MASK else "keep" if b == a else "random" if b in RANDOM else "other")
    return kinds.pop() if len(kinds) == 1 else "mixed"


def runs(chosen):
    edges = np.diff(np.concatenate([[0], chosen.astype(int), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def check_80_10_10(outcomes):
    n = len(outcomes)
    counts = {k: outcomes.count(k) for k in ("mask", "random", "keep", "mixed", "other")}
    assert counts["mixed"] == 0 and counts["other"] == 0, counts     # one choice per unit
    assert within(counts["mask"], n, 0.8) and within(counts["random"], n, 0.1) and within(counts["keep"], n, 0.1)


def test_spanbert_one_choice_per_span():
    rng = np.random.default_rng(0)
    ids = np.arange(100, 300)
    outcomes = []
    for _ in range(400):
        inputs, targets = span_masking(ids, rng, mask_id=MASK, random_ids=RANDOM)
        chosen = targets != IGNORE
        assert np.array_equal(targets[chosen], ids[chosen]) and np.array_equal(inputs[~chosen], ids[~chosen])
        outcomes += [outcome(ids, inputs, s, e) for s, e in runs(chosen) if e - s >= 2]
    assert len(outcomes) > 2000
    check_80_10_10(outcomes)


def test_whole_word_masking_one_choice_per_word():
    rng = np.random.default_rng(1)
    ids = np.arange(100, 160)
    starts = np.zeros(60, dtype=bool)
    starts[::3] = True                                              # 20 words of 3 pieces
    outcomes = []
    for _ in range(400):
        inputs, targets = whole_word_masking(ids, starts, rng, mask_id=MASK, random_ids=RANDOM)
        chosen = (targets != IGNORE).reshape(20, 3)
        assert (chosen.all(1) | ~chosen.any(1)).all()
        outcomes += [outcome(ids, inputs, 3 * w, 3 * w + 3) for w in np.flatnonzero(chosen.all(1))]
    check_80_10_10(outcomes)


ENTITIES = [(2, 5), (5, 7), (9, 13), (15, 16), (18, 21), (24, 28)]      # (5, 7) touches (2, 5)


def test_entity_masking_masks_whole_entities_only():
    rng = np.random.default_rng(2)
    ids = np.arange(100, 130)
    inside = np.zeros(30, dtype=bool)
    for s, e in ENTITIES:
        inside[s:e] = True
    outcomes, touching_differ = [], False
    for _ in range(600):
        inputs, targets = entity_masking(ids, ENTITIES, rng, mask_id=MASK, random_ids=RANDOM, mask_prob=0.3)
        chosen = targets != IGNORE
        assert not chosen[~inside].any() and np.array_equal(inputs[~chosen], ids[~chosen])
        assert all(chosen[s:e].all() or not chosen[s:e].any() for s, e in ENTITIES)
        picked = [(s, e) for s, e in ENTITIES if chosen[s:e].all()]
        assert sum(e - s for s, e in picked) >= 9                    # 30 % of 30 tokens, in whole entities
        done = {(s, e): outcome(ids, inputs, s, e) for s, e in picked}
        outcomes += list(done.values())
        if (2, 5) in done and (5, 7) in done and done[(2, 5)] != done[(5, 7)]:
            touching_differ = True                                   # each entity is its own unit
    check_80_10_10(outcomes)
    assert touching_differ
