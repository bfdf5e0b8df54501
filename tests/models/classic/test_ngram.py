"""n-gram LMs: normalisation of every smoothing, hand-worked Kneser-Ney, the protocol, bad input."""
import numpy as np
import pytest

from minipt.models.classic.ngram import SMOOTHINGS, NGramLM, NGramVocab
from minipt.models.protocol import check_protocol


def corpus(seed=0, V=6, n=300):
    return np.random.default_rng(seed).integers(0, V, size=n)


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_smoothing_sums_to_one_in_every_context(smoothing, order):
    V = 6
    rng = np.random.default_rng(1)
    # skewed data so that some contexts are unseen and some see every word
    data = rng.choice(V, size=400, p=[0.4, 0.3, 0.15, 0.1, 0.05, 0.0])
    model = NGramLM(V, order=order, smoothing=smoothing).fit([data[:200], data[200:]])
    contexts = [[]] + [list(c) for c in rng.integers(0, V, size=(40, order - 1))] if order > 1 else [[]]
    contexts += [list(data[i:i + order - 1]) for i in range(0, 60)]
    for ctx in contexts:
        p = model.distribution(ctx)
        assert p.shape == (V,) and np.all(p >= 0)
        if smoothing == "mle" and order > 1 and np.isnan(p).any():
            pytest.fail("MLE gave NaN")
        assert p.sum() == pytest.approx(1.0, abs=1e-12), (smoothing, ctx)


def test_kneser_ney_matches_hand_computed_bigram_values():
    # corpus a b a b c a, D = 0.5: continuation counts a 2 (after b, c), b 1, c 1 of 4 bigram types
    model = NGramLM(3, order=2, smoothing="kn", discount=0.5).fit(np.array([0, 1, 0, 1, 2, 0]))
    np.testing.assert_allclose(model.distribution([]), [0.5, 0.25, 0.25], rtol=1e-12)
    np.testing.assert_allclose(model.distribution([0]), [0.125, 0.8125, 0.0625], rtol=1e-12)
    np.testing.assert_allclose(model.distribution([1]), [0.5, 0.125, 0.375], rtol=1e-12)
    # an unseen context (none here) would give the unigram; context c: 1 count, 1 type
    np.testing.assert_allclose(model.distribution([2]), [0.5 + 0.5 * 0.5, 0.25 * 0.5, 0.25 * 0.5], rtol=1e-12)


def test_kneser_ney_default_discount_is_n1_over_n1_plus_2n2_per_order():
    # corpus a b a b c a, no discount given. Bigram counts ab 2, ba 1, bc 1, ca 1: n1 = 3, n2 = 1,
    # D2 = 3 / (3 + 2) = 0.6. Continuation counts a 2, b 1, c 1: n1 = 2, n2 = 1, D1 = 2 / (2 + 2) = 0.5,
    # so the unigram is the one of the D = 0.5 test above: [0.5, 0.25, 0.25].
    model = NGramLM(3, order=2, smoothing="kn").fit(np.array([0, 1, 0, 1, 2, 0]))
    np.testing.assert_allclose(model.distribution([]), [0.5, 0.25, 0.25], rtol=1e-12)
    # context a: c(a .) 2, one type: P(b|a) = (2 - 0.6) / 2 + 0.6 * 1/2 * 0.25
    np.testing.assert_allclose(model.distribution([0]), [0.3 * 0.5, 0.7 + 0.3 * 0.25, 0.3 * 0.25], rtol=1e-12)
    # context b: c(b .) 2, two types (ba, bc): weight 0.6 * 2/2 on the unigram
    np.testing.assert_allclose(model.distribution([1]), [0.2 + 0.3, 0.6 * 0.25, 0.2 + 0.15], rtol=1e-12)
    # context c: c(c .) 1, one type (ca)
    np.testing.assert_allclose(model.distribution([2]), [0.4 + 0.3, 0.15, 0.15], rtol=1e-12)


def test_mle_and_addk_match_counts():
    data = np.array([0, 1, 0, 1, 2, 0])
    mle = NGramLM(3, order=2, smoothing="mle").fit(data)
    np.testing.assert_allclose(mle.distribution([1]), [0.5, 0.0, 0.5])
    add1 = NGramLM(3, order=2, smoothing="addk", k=1.0).fit(data)
    np.testing.assert_allclose(add1.distribution([0]), [1 / 5, 3 / 5, 1 / 5])


def test_kn_beats_addk_and_mle_is_infinite_on_unseen_bigrams():
    rng = np.random.default_rng(0)
    V = 20
    trans = rng.dirichlet(np.full(V, 0.2), size=V)
    seq = [0]
    for _ in range(3000):
        seq.append(rng.choice(V, p=trans[seq[-1]]))
    seq = np.array(seq)
    train, test = seq[:2500], seq[2500:]
    losses = {}
    for sm in ("mle", "addk", "kn", "backoff"):
        m = NGramLM(V, order=3, smoothing=sm).fit(train)
        losses[sm] = -m.log_prob(test[None, :-1], test[None, 1:]) / (len(test) - 1)
    assert losses["kn"] < losses["addk"] and losses["backoff"] < losses["addk"]
    assert np.isinf(losses["mle"])


def test_protocol_forward_and_log_prob_agree():
    model = NGramLM(6, order=3).fit(corpus())
    check_protocol(model)
    idx = corpus(2, n=20).reshape(2, 10)
    targets = np.roll(idx, -1, axis=1)
    targets[0, :3] = -100
    loss, logits = model(idx, targets)
    assert logits.shape == (2, 10, 6)
    np.testing.assert_allclose(np.exp(logits).sum(-1), 1.0, atol=1e-12)
    assert model.log_prob(idx, targets) == pytest.approx(-float(loss) * 17, rel=1e-12)
    assert model.block_size is None and model.new_cache() is None and not model.has_backward
    with pytest.raises(NotImplementedError, match="no backward"):
        model.backward()
    assert model.spec()["model"] == "ngram"


def test_sampling_follows_the_counts():
    # a deterministic cycle 0 1 2 0 1 2 ...: the MLE trigram samples it back
    model = NGramLM(3, order=3, smoothing="mle").fit(np.tile([0, 1, 2], 20))
    out = model.sample([0, 1], 9, np.random.default_rng(0))
    assert out.tolist() == [2, 0, 1] * 3


def test_vocab_pads_and_maps_unknown_words():
    vocab = NGramVocab([["a", "b", "a"], ["c"]], min_count=2)
    assert vocab.words == ["<unk>", "<s>", "</s>", "a"]
    ids = vocab.encode(["a", "b"])
    assert ids.tolist() == [3, 0]
    assert vocab.pad(ids, order=3).tolist() == [1, 1, 3, 0, 2]
    with pytest.raises(KeyError, match="'zebra' is not in the vocabulary"):
        vocab.encode(["zebra"], unk=False)


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="order must be an integer >= 1, got 0"):
        NGramLM(5, order=0)
    with pytest.raises(ValueError, match="smoothing"):
        NGramLM(5, smoothing="good-turing")
    with pytest.raises(ValueError, match="corpus has 0 token"):
        NGramLM(5).fit(np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="corpus has 1 token"):
        NGramLM(5).fit(np.array([3]))
    with pytest.raises(ValueError, match="corpus is empty"):
        NGramVocab([[]])
    model = NGramLM(5, order=2).fit(corpus(V=5))
    with pytest.raises(ValueError, match="reads at most 1 tokens, got 2"):
        model.distribution([1, 2])
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model.distribution([7])
    with pytest.raises(RuntimeError, match="call fit"):
        NGramLM(5).distribution([])
    with pytest.raises(ValueError, match="discount"):
        NGramLM(5, discount=1.5)
