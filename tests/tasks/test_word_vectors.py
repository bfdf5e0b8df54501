"""Static-vector evaluation on the toy language's truth: neighbours, purity, senses, OOV, the count baseline."""
import numpy as np
import pytest

from minipt.data.hmm_language import HMMLanguage
from minipt.data.toy_grammar import CATEGORIES
from minipt.tasks.word_vectors import (
    StaticVectors,
    category_purity,
    evaluate,
    ppmi_svd,
    sense_accuracy,
    sense_categories,
)


def one_hot_categories():
    """Vectors that are exactly the category indicator (+ a word's own tiny noise)."""
    words = sorted({w for ws in CATEGORIES.values() for w in ws}) + ["bank", "bat"]
    cats = sorted(CATEGORIES)
    V = np.zeros((len(words), len(cats)))
    for i, w in enumerate(words):
        for k, c in enumerate(cats):
            V[i, k] = w in CATEGORIES[c]
    V[words.index("bank"), cats.index("places")] = 0.9          # bank leans to places
    V[words.index("bank"), cats.index("money")] = 0.5
    V[words.index("bat"), cats.index("animals")] = 1.0
    V += np.random.default_rng(0).normal(0, 0.01, V.shape)
    return StaticVectors(V, words)


def test_purity_nearest_and_oov():
    sv = one_hot_categories()
    assert category_purity(sv, k=1) == 1.0
    shuffled = StaticVectors(np.random.default_rng(1).normal(size=sv.vectors.shape), sv.vocab)
    assert category_purity(shuffled, k=1) < 0.5
    assert {w for w, _ in sv.nearest("cat", 3)} <= set(CATEGORIES["animals"]) | {"bat"}
    with pytest.raises(KeyError, match="no vector for 'unicorn'.*cannot build one for an unseen word"):
        sv.vector("unicorn")
    with pytest.raises(KeyError, match="unicorn"):
        sv.nearest("unicorn")


def test_one_static_vector_labels_every_token_with_one_sense():
    assert sense_categories() == {"bank/river": "places", "bank/money": "money",
                                  "bat/animal": "animals", "bat/thing": "things"}
    sv = one_hot_categories()
    tokens = ["bank/river"] * 6 + ["bank/money"] * 4
    acc, majority = sense_accuracy(sv, "bank", tokens)
    assert (acc, majority) == (0.6, 0.6)                   # leans to places: every token called "river"
    acc, majority = sense_accuracy(sv, "bank", ["bank/money"] * 7 + ["bank/river"] * 3)
    assert acc == pytest.approx(0.3) and majority == pytest.approx(0.7)


def test_count_vectors_answer_analogies_on_the_toy_language():
    lang = HMMLanguage.build()
    words = lang.sample_words(60_000, np.random.default_rng(0))
    ix = {w: i for i, w in enumerate(lang.vocab)}
    scores = evaluate(ppmi_svd([np.array([ix[w] for w in words])], len(ix), window=2, dim=20), lang.vocab)
    assert scores["asked"] == 32 and scores["analogy"] > 0.3
    assert scores["category_gap"] > 0.2 and scores["purity"] > 0.6
