"""What the toy grammar promises: categories, analogies, senses visible in samples."""
from collections import Counter, defaultdict

import numpy as np
import pytest

from minipt.data.hmm_language import HMMLanguage
from minipt.data.toy_grammar import (
    CATEGORIES,
    GENDER_PAIRS,
    SENSES,
    STATES,
    TRANSITIONS,
    analogies,
)


@pytest.fixture(scope="module")
def sample():
    lang = HMMLanguage.build()
    rng = np.random.default_rng(0)
    return [lang.sample_sentence(rng) for _ in range(4000)]


def test_categories_are_disjoint_and_unambiguous():
    seen = Counter(w for words in CATEGORIES.values() for w in words)
    assert all(n == 1 for n in seen.values())
    assert not set(SENSES) & set(seen)
    assert {"cat", "dog"} <= set(CATEGORIES["animals"]) and "river" in CATEGORIES["places"]


def test_analogies_pair_words_of_the_same_rank():
    quads = analogies()
    assert ("man", "woman", "king", "queen") in quads and ("man", "king", "woman", "queen") in quads
    for a, b, c, d in quads:
        assert len({a, b, c, d}) == 4


def test_gender_shows_in_the_possessive(sample):
    """Male subjects are never followed by "her", female ones never by "his"; both occur."""
    male = {m for m, _ in GENDER_PAIRS}
    female = {f for _, f in GENDER_PAIRS}
    counts = Counter()
    for words, states in sample:
        subject = next(w for w, s in zip(words, states) if s in ("man", "woman", "king", "queen", "animal"))
        for w in words:
            if w in ("his", "her"):
                counts[(subject in male, subject in female, w)] += 1
    assert counts[(True, False, "her")] == 0 and counts[(False, True, "his")] == 0
    assert counts[(True, False, "his")] > 50 and counts[(False, True, "her")] > 50


def test_royalty_shows_in_the_verbs(sample):
    royal = set(STATES["king"] + STATES["queen"])
    rulers = Counter(words[i - 1] in royal for words, _ in sample for i, w in enumerate(words) if w == "rules")
    assert rulers[False] == 0 and rulers[True] > 30


def test_each_sense_is_told_apart_by_the_two_words_before(sample):
    senses_by_context = defaultdict(set)
    for words, states in sample:
        for i, (w, s) in enumerate(zip(words, states)):
            if w in SENSES:
                senses_by_context[(w, tuple(words[max(i - 2, 0):i]))].add(SENSES[w][s])
    per_word = defaultdict(set)
    for (w, _), senses in senses_by_context.items():
        assert len(senses) == 1, f"{w} is ambiguous after {_}"
        per_word[w] |= senses
    assert per_word == {w: set(s.values()) for w, s in SENSES.items()}


def test_transition_rows_are_distributions():
    for s, row in TRANSITIONS.items():
        assert sum(row.values()) == pytest.approx(1.0) and set(row) <= set(STATES)


def test_count_vectors_find_the_built_in_analogies_and_categories():
    """Positive-PMI co-occurrence vectors reduced by SVD (Levy and Goldberg 2014), a
    baseline written here: far above chance (1 / vocabulary) on the analogies, and
    categories cluster; static vectors cannot tell senses apart."""
    from minipt.data.toy_vectors import analogy_accuracy, category_gap, sense_gap
    lang = HMMLanguage.build()
    words = lang.sample_words(100_000, np.random.default_rng(0))
    ix = {w: i for i, w in enumerate(lang.vocab)}
    ids = np.array([ix[w] for w in words])
    counts = np.zeros((len(ix), len(ix)))
    for d in (1, 2):
        np.add.at(counts, (ids[:-d], ids[d:]), 1)
        np.add.at(counts, (ids[d:], ids[:-d]), 1)
    p = counts / counts.sum()
    marginal = p.sum(1, keepdims=True)
    with np.errstate(divide="ignore"):
        ppmi = np.maximum(np.log(p / (marginal @ marginal.T)), 0)
    u, s, _ = np.linalg.svd(ppmi)
    vectors = u[:, :20] * np.sqrt(s[:20])
    accuracy, asked = analogy_accuracy(vectors, lang.vocab)
    assert asked == len(analogies()) and accuracy > 0.3
    assert category_gap(vectors, lang.vocab) > 0.2
    bank = vectors[[ix["bank"]] * 4]
    assert sense_gap(bank, ["bank/river", "bank/money"] * 2) == pytest.approx(0.0, abs=1e-9)
