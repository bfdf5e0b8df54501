"""minipt's Kneser-Ney with NLTK's conventions gives NLTK's perplexity (runs where NLTK is installed:
the bench extra)."""
import math

import numpy as np
import pytest

from minipt.data.hmm_language import HMMLanguage
from minipt.models.classic.ngram import NGramLM, NGramVocab
from minipt.models.protocol import IGNORE


def sentences(n_words, seed):
    words = [w for w in HMMLanguage.build().sample_words(n_words, np.random.default_rng(seed)) if w != "\n"]
    out, cur = [], []
    for w in words:
        cur.append(w)
        if w == ".":
            out.append(cur)
            cur = []
    return out


@pytest.mark.parametrize("order", [2, 3, 4])
def test_kneser_ney_with_nltk_conventions_equals_nltk(order):
    lm_mod = pytest.importorskip("nltk.lm")
    from nltk.lm.preprocessing import pad_both_ends, padded_everygram_pipeline
    from nltk.util import ngrams
    train, test = sentences(3000, 0), sentences(400, 1)[:20]
    grams, words = padded_everygram_pipeline(order, train)
    ref = lm_mod.KneserNeyInterpolated(order, discount=0.1)
    ref.fit(grams, words)
    expected = ref.perplexity([g for s in test for g in ngrams(pad_both_ends(s, n=order), order)])

    vocab = NGramVocab(train)
    model = NGramLM(len(vocab), order=order, smoothing="kn", nltk=True)
    model.fit([vocab.pad(vocab.encode(s), order, n_end=order - 1) for s in train])
    stream = np.concatenate([vocab.pad(vocab.encode(s), order, n_end=order - 1) for s in test])
    idx, targets = stream[:-1], stream[1:].copy()
    targets[targets == vocab.index["<s>"]] = IGNORE
    ppl = math.exp(-model.log_prob(idx[None], targets[None]) / int((targets != IGNORE).sum()))
    assert ppl == pytest.approx(expected, rel=1e-9)
