"""The toy language's oracle: a probability distribution, and the one its samples follow."""
import itertools
import math

import numpy as np
import pytest

from minipt.data.hmm_language import HMMLanguage, toy_corpus

TINY_STATES = {"a": ["x", "y"], "b": ["y", "z"], "end": ["\n"]}
TINY_T = {"a": {"a": 0.3, "b": 0.5, "end": 0.2}, "b": {"a": 0.6, "end": 0.4}, "end": {"a": 1.0}}


def tiny():
    return HMMLanguage.build(TINY_STATES, TINY_T, start="a")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_oracle_sums_to_one_over_all_prefixes_of_length_n(n):
    lang = tiny()
    total = sum(math.exp(lang.log_prob(list(w))) for w in itertools.product(lang.vocab, repeat=n))
    assert total == pytest.approx(1.0, abs=1e-12)


def test_oracle_matches_sample_frequencies():
    """Chi-square of 20k sampled 3-word prefixes against the oracle (df = 26; the
    99.99 % point is about 62)."""
    lang = tiny()
    rng = np.random.default_rng(0)
    prefixes = [tuple(lang.sample_words(3, rng)[:3]) for _ in range(20_000)]
    counts = {}
    for p in prefixes:
        counts[p] = counts.get(p, 0) + 1
    chi2 = 0.0
    for w in itertools.product(lang.vocab, repeat=3):
        expected = 20_000 * math.exp(lang.log_prob(list(w)))
        if expected > 0:
            chi2 += (counts.get(w, 0) - expected) ** 2 / expected
        else:
            assert w not in counts
    assert chi2 < 62


def test_entropy_rate_estimate_agrees_with_a_fresh_sample():
    lang = HMMLanguage.build()
    rate, se = lang.entropy_rate(n_chars=100_000, seed=1)
    _, val, oracle, _ = toy_corpus(200_000, seed=7)
    assert abs(oracle - rate) < 5 * max(se, 0.002) and 0.3 < rate < 0.6


def test_render_parse_roundtrip_and_determinism():
    lang = HMMLanguage.build()
    words = lang.sample_words(50, np.random.default_rng(3))
    assert lang.parse(lang.render(words)) == words and words[-1] == "\n"
    assert toy_corpus(5_000, seed=2) == toy_corpus(5_000, seed=2)


def test_bad_input():
    lang = HMMLanguage.build()
    with pytest.raises(ValueError, match="'zebra' is not in the toy language"):
        lang.nats_per_char("the zebra runs . ")
    with pytest.raises(ValueError, match="n_words"):
        lang.sample_words(0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="sum to 1"):
        HMMLanguage.build(TINY_STATES, {**TINY_T, "a": {"b": 0.5}}, start="a")


def test_walk_inverts_each_uniform_through_the_cumulative_rows():
    """The walk against an independent inverse-CDF sampler on the same stream of
    uniforms: word = searchsorted(cumsum(E[state]), u), next state likewise from A."""
    lang = HMMLanguage.build()
    rng, ref_rng = np.random.default_rng(7), np.random.default_rng(7)
    walk = lang.walk(rng)
    state = int(np.argmax(lang.pi))
    for _ in range(3000):
        u = ref_rng.random(2)
        word = min(int(np.searchsorted(np.cumsum(lang.E[state]), u[0], side="right")), len(lang.vocab) - 1)
        assert next(walk) == (state, word)
        state = min(int(np.searchsorted(np.cumsum(lang.A[state]), u[1], side="right")), len(lang.states) - 1)
