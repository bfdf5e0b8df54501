"""Decoding does what its names say, against a bigram model whose logits are a table:
greedy is the argmax, temperature divides the logits (frequencies match softmax(z / T)),
top-k and top-p restrict the support (never a token outside; every token inside shows),
stop tokens end a sequence, and beam search's GNMT length penalty changes the winner
exactly when it should. Frequencies are checked against 5-sigma binomial bounds, and each
test also checks that the wrong alternative falls outside them (the test has power)."""

import numpy as np
import pytest

from minipt.inference.decoding import SamplingConfig, beam_search, generate

N = 3_000                                  # draws per frequency test


class BigramLM:
    """The LM interface generate and beam_search use; logits of the next token = table[last token]."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)                  # (V, V)
        self.block_size = 10 ** 6
        self.training = True
        self.modes = []

    def new_cache(self):
        return None                                                       # decoding re-reads the window

    def eval(self):
        return self.train(False)

    def train(self, mode=True):
        self.training = mode
        return self

    def __call__(self, idx, targets=None, cache=None):
        self.modes.append(self.training)
        return None, self.table[idx]                                      # (B, T, V)


def constant_lm(z):
    """The same next-token logits z (V,) whatever came before."""
    return BigramLM(np.tile(np.asarray(z, dtype=np.float64), (len(z), 1)))


def softmax(z):
    e = np.exp(z - np.max(z))
    return e / e.sum()


def frequencies(model, cfg, seed=0, prompt=(0,)):
    draws = generate(model, np.array(prompt), SamplingConfig(max_new_tokens=N, **cfg), np.random.default_rng(seed))
    assert len(draws) == N
    return np.bincount(draws, minlength=model.table.shape[1])


def within(counts, p, n=N):
    """Every count within 5 binomial standard deviations of n p (p = 0: never drawn)."""
    p = np.asarray(p)
    sd = np.sqrt(n * p * (1 - p))
    return bool(np.all(np.abs(counts - n * p) <= 5 * sd + 1e-9))


Z = np.log(np.array([0.32, 0.24, 0.18, 0.12, 0.08, 0.06]))               # V = 6, sorted on purpose
Z_SHUFFLED = Z[[3, 0, 5, 1, 4, 2]]                                         # not sorted: order is found


@pytest.mark.parametrize("T", [0.5, 2.0])
def test_temperature_divides_the_logits(T):
    counts = frequencies(constant_lm(Z_SHUFFLED), dict(temperature=T))
    assert within(counts, softmax(Z_SHUFFLED / T))
    assert not within(counts, softmax(Z_SHUFFLED * T))                     # multiplying is told apart
    assert not within(counts, softmax(Z_SHUFFLED))


def test_temperature_one_samples_the_model_distribution():
    counts = frequencies(constant_lm(Z_SHUFFLED), dict(temperature=1.0))
    assert within(counts, softmax(Z_SHUFFLED))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_top_k_samples_exactly_the_k_most_likely(k):
    z = Z_SHUFFLED
    top = np.argsort(-z)[:k]
    counts = frequencies(constant_lm(z), dict(temperature=1.0, top_k=k))
    assert set(np.flatnonzero(counts)) == set(top.tolist())               # nothing outside, everything inside
    p = np.zeros_like(z)
    p[top] = softmax(z[top])
    assert within(counts, p)


def test_top_k_with_temperature_renormalises_the_tempered_top_k():
    z, k, T = Z_SHUFFLED, 3, 0.7
    top = np.argsort(-z)[:k]
    counts = frequencies(constant_lm(z), dict(temperature=T, top_k=k))
    p = np.zeros_like(z)
    p[top] = softmax(z[top] / T)
    assert within(counts, p)


@pytest.mark.parametrize("top_p,kept", [(0.3, 1), (0.5, 2), (0.7, 3), (0.9, 5), (1.0, 6)])
def test_top_p_samples_exactly_the_nucleus(top_p, kept):
    """The nucleus: the fewest most likely tokens whose mass reaches top_p (0.32, 0.56,
    0.74, 0.86, 0.94, 1.0 cumulated)."""
    z = Z_SHUFFLED
    nucleus = np.argsort(-z)[:kept]
    counts = frequencies(constant_lm(z), dict(temperature=1.0, top_p=top_p))
    assert set(np.flatnonzero(counts)) == set(nucleus.tolist())
    p = np.zeros_like(z)
    p[nucleus] = softmax(z[nucleus])
    assert within(counts, p)


def test_top_p_is_taken_after_temperature():
    """At T = 0.5 the distribution sharpens to (0.47, 0.26, 0.15, ...): top_p 0.7 keeps 2 tokens
    (at T = 1 it would keep 3)."""
    z = Z_SHUFFLED
    q = softmax(z / 0.5)
    order = np.argsort(-q)
    kept = int(np.searchsorted(np.cumsum(q[order]), 0.7) + 1)
    assert kept == 2
    counts = frequencies(constant_lm(z), dict(temperature=0.5, top_p=0.7))
    assert set(np.flatnonzero(counts)) == set(order[:kept].tolist())


def test_top_k_and_top_p_together_take_the_smaller_support():
    z = Z_SHUFFLED
    counts = frequencies(constant_lm(z), dict(temperature=1.0, top_k=2, top_p=0.9))
    assert set(np.flatnonzero(counts)) == set(np.argsort(-z)[:2].tolist())
    counts = frequencies(constant_lm(z), dict(temperature=1.0, top_k=5, top_p=0.5))
    assert set(np.flatnonzero(counts)) == set(np.argsort(-z)[:2].tolist())


def random_bigram(V=7, seed=0):
    return BigramLM(np.random.default_rng(seed).standard_normal((V, V)) * 2)


def test_greedy_follows_the_argmax_of_the_last_token_and_runs_in_eval_mode():
    m = random_bigram()
    prompt = [3, 1, 5]                                   # the last token decides, not the first
    new = generate(m, np.array(prompt), SamplingConfig(max_new_tokens=8, temperature=0), np.random.default_rng(0))
    want, last = [], prompt[-1]
    for _ in range(8):
        last = int(np.argmax(m.table[last]))
        want.append(last)
    assert new.tolist() == want
    assert m.modes and not any(m.modes) and m.training     # eval mode while decoding, train mode restored


def test_sampling_conditions_on_the_last_token():
    """A table whose rows put almost all mass on (row + 1) mod V: samples follow the chain."""
    V = 5
    table = np.full((V, V), -20.0)
    table[np.arange(V), (np.arange(V) + 1) % V] = 0.0
    new = generate(BigramLM(table), np.array([2, 0]), SamplingConfig(max_new_tokens=6, temperature=1.0),
                   np.random.default_rng(0))
    assert new.tolist() == [1, 2, 3, 4, 0, 1]


def test_stop_token_ends_the_sequence_and_is_included():
    z = np.log(np.array([0.3, 0.3, 0.3, 0.1]))                     # token 3 stops, p = 0.1
    m = constant_lm(z)
    rng = np.random.default_rng(0)
    lengths = []
    for _ in range(300):
        out = generate(m, np.array([0]), SamplingConfig(max_new_tokens=30, temperature=1.0, stop_tokens=(3,)), rng)
        assert 3 not in out[:-1].tolist()
        assert out[-1] == 3 or len(out) == 30
        lengths.append(len(out))
    # geometric(0.1) capped at 30: mean (1 - 0.9^30) / 0.1 = 9.58
    assert abs(np.mean(lengths) - (1 - 0.9 ** 30) / 0.1) < 5 * np.std(lengths) / np.sqrt(300)


# -- beam search ---------------------------------------------------------------------------
P, A, B, S, X = 0, 1, 2, 3, 4                 # prompt, two words, the stop token, filler


def penalty_lm():
    """From P: S with 0.48 (a short answer), A with 0.52; A -> B 0.78; B -> S 0.78.
    log P: [S] = -0.734; [A, B, S] = -1.151. GNMT scores lp / ((5 + n) / 6)^alpha:
    alpha 0 and 1 prefer [S] (-0.734 against -1.151 and -0.863), alpha 2 prefers
    [A, B, S] (-0.647 against -0.734)."""
    rows = np.full((5, 5), 1e-9)
    rows[P, S], rows[P, A] = 0.48, 0.52
    rows[A, B], rows[A, S], rows[A, X] = 0.78, 0.11, 0.11
    rows[B, S], rows[B, X] = 0.78, 0.22
    rows[X, X] = rows[S, S] = 1.0
    return BigramLM(np.log(rows / rows.sum(1, keepdims=True)))


@pytest.mark.parametrize("prompt", [[P], [X, X, X, P]])     # |Y| counts new tokens only
@pytest.mark.parametrize("alpha,winner", [(0.0, [S]), (1.0, [S]), (2.0, [A, B, S])])
def test_length_penalty_changes_the_winner_as_gnmt_says(alpha, winner, prompt):
    out = beam_search(penalty_lm(), np.array(prompt), beam_size=3, max_new_tokens=6, length_penalty=alpha,
                      stop_tokens=(S,))
    assert out.tolist() == winner


def test_beam_search_without_penalty_finds_the_most_likely_sequence():
    """With beams >= V^(n-1) nothing is pruned: the result is the exhaustive argmax of log P."""
    m = random_bigram(V=4, seed=3)
    logp = m.table - np.log(np.exp(m.table).sum(1, keepdims=True))     # (V, V) log-softmax of each row
    n = 3
    best, best_lp = None, -np.inf
    for seq in np.ndindex(*(4,) * n):
        prev, lp = 2, 0.0
        for t in seq:
            lp, prev = lp + logp[prev, t], t
        if lp > best_lp:
            best, best_lp = list(seq), lp
    out = beam_search(m, np.array([2]), beam_size=16, max_new_tokens=n, length_penalty=0.0)
    assert out.tolist() == best
    assert not any(m.modes) and m.training


def test_beam_search_does_not_stop_while_a_longer_beam_can_still_win():
    """After token 1, stopping (0) and going on (2) are equally likely; after 2 the chain
    2 -> 3 -> 4 -> 5 is near certain. With a length penalty alpha = 1 the long
    continuation has almost the same log P over a larger denominator, so it must win;
    stopping the search as soon as a finished beam ties the live one would return [0]."""
    V = 6
    z = np.full((V, V), -30.0)
    z[1, 0] = z[1, 2] = 0.0                      # 1 -> stop or 2, half each
    z[2, 3] = z[3, 4] = z[4, 5] = z[5, 0] = 0.0  # then a sure chain, ending with the stop token
    model = BigramLM(z)
    best = beam_search(model, np.array([1]), beam_size=2, max_new_tokens=6, length_penalty=1.0, stop_tokens=(0,))
    assert best.tolist() == [2, 3, 4, 5, 0]
