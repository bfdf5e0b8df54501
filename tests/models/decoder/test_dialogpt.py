"""DialoGPT decoding (minipt.models.decoder.dialogpt): candidates sampled until the separator,
MMI re-ranking by the backward model's score, distinct-n, and the whole GPT's gradient
under the response-only loss mask."""
import warnings

import numpy as np
import pytest

from minipt import check_module
from minipt.models.decoder.dialogpt import (
    backward_scores,
    distinct_n,
    forward_scores,
    mmi_rerank,
    sample_candidates,
    target_log_probs,
)
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.nn.kv_cache import KVCache
from minipt.objectives.common import IGNORE
from minipt.objectives.dialogue import backward_example, forward_example, pad_batch

PAD, EOT, V = 0, 1, 8


class BigramLM:
    """A stand-in LM with the GPT call signature: logits[b, t] = log_table[idx[b, t]],
    so every sequence's probability can be worked out by hand."""

    def __init__(self, table: np.ndarray, block_size: int = 32):
        self.log_table = np.log(table / table.sum(axis=1, keepdims=True))   # (V, V) rows sum to 1
        self.block_size = block_size
        self.training = True

    def new_cache(self):
        return KVCache(1)

    def eval(self):
        self.training = False
        return self

    def train(self, mode=True):
        self.training = mode
        return self

    def __call__(self, idx, targets=None, cache=None):
        if cache is not None:                                                  # keep cache.length honest
            kv = np.zeros((idx.shape[0], 1, idx.shape[1], 1))                  # (B, H, T, hd)
            cache[0].append(kv, kv)
        return None, self.log_table[idx]                                       # (B, T, V)

    def by_hand(self, seq, first_target):
        """sum of log p(seq[i] | seq[i-1]) for i >= first_target."""
        return sum(self.log_table[seq[i - 1], seq[i]] for i in range(first_target, len(seq)))


def test_gpt_gradient_with_the_response_only_mask_float64():
    """The whole GPT-2 (tied embeddings) with targets IGNORE on the history: the loss
    is the mean NLL of the response tokens only, and its gradient passes gradcheck."""
    cfg = GPTConfig.gpt2(vocab_size=11, block_size=16, n_layer=2, n_head=2, d_model=16)
    model = GPT(cfg, rng=np.random.default_rng(0)).to(np.float64)
    x0, y0 = forward_example([np.array([3, 4, 5]), np.array([6, 7])], np.array([8, 9, 2]), EOT)
    x1, y1 = backward_example([np.array([4, 4]), np.array([10, 3, 5])], np.array([7, 6]), EOT)
    x, y = pad_batch([(x0, y0), (x1, y1)], PAD)                               # (2, 10), row 1 padded once
    assert (y == IGNORE).sum() == 6 + (2 + 1)                                 # history 6; history 2 + padding 1
    loss, logits = model(x, y)
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    keep = y != IGNORE
    by_hand = -np.mean([logp[b, t, y[b, t]] for b, t in zip(*np.nonzero(keep))])
    assert abs(float(loss) - by_hand) < 1e-12
    result = check_module(model, x, y, select=lambda out: out[0], max_checks=8)
    assert result.passed, str(result)
    assert "wte.weight" in [a.name for a in result.arrays]


def test_target_log_probs_equal_the_model_log_prob_and_ignore_padding():
    cfg = GPTConfig.gpt2(vocab_size=11, block_size=16, n_layer=2, n_head=2, d_model=16)
    model = GPT(cfg, rng=np.random.default_rng(0)).to(np.float64)
    hist = [np.array([3, 4, 5])]
    examples = [forward_example(hist, np.array(r), EOT) for r in ([6], [7, 8, 9, 10])]
    batched = target_log_probs(model, examples, PAD)                         # the first row is padded
    for (x, y), got in zip(examples, batched):
        assert abs(got - model.log_prob(x[None], y[None])) < 1e-10
    np.testing.assert_allclose(forward_scores(model, hist, [np.array([6]), np.array([7, 8, 9, 10])],
                                              eot_id=EOT, pad_id=PAD), batched, rtol=0, atol=1e-12)
    assert model.training                                                    # mode restored


def test_sample_candidates_stop_at_the_separator_and_strip_it():
    table = np.full((V, V), 1e-3)
    table[EOT, 5], table[5, 6], table[6, EOT] = 1.0, 1.0, 1.0                # after "|": 5 6 |
    table[3, 4] = table[4, EOT] = 1.0
    lm = BigramLM(table)
    cands = sample_candidates(lm, [np.array([3, 4])], 3, eot_id=EOT, rng=np.random.default_rng(0), top_k=1)
    assert len(cands) == 3
    for c in cands:
        np.testing.assert_array_equal(c, [5, 6])
    # without a separator in reach, a reply is cut at max_new_tokens and kept
    loop = np.full((V, V), 1e-3)
    loop[EOT, 5] = loop[5, 5] = 1.0
    cands = sample_candidates(BigramLM(loop), [np.array([3])], 2, eot_id=EOT, rng=np.random.default_rng(0),
                              top_k=1, max_new_tokens=4)
    assert all(list(c) == [5, 5, 5, 5] for c in cands)


def test_sampled_candidates_from_a_gpt_are_varied_and_fit_the_context():
    cfg = GPTConfig.gpt2(vocab_size=11, block_size=12, n_layer=1, n_head=2, d_model=8)
    model = GPT(cfg, rng=np.random.default_rng(0))
    history = [np.array([3, 4, 5, 6]), np.array([7, 8, 9])]                   # prompt of 9 tokens
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                        # generate must not crop the prompt:
        cands = sample_candidates(model, history, 6, eot_id=EOT, rng=np.random.default_rng(0),  # 9 + 5 > 12,
                                  top_k=None, max_new_tokens=5)              # so the first turn is dropped
    assert len(cands) == 6 and all(len(c) <= 5 and EOT not in c for c in cands)
    assert len({tuple(c) for c in cands}) > 1


class FirstTokenLM(BigramLM):
    """A stand-in LM whose next-token distribution depends on the row's first token and
    the previous token: p(next | first, prev) = table[first, prev, next] (no cache)."""

    def __init__(self, table: np.ndarray, block_size: int = 32):
        super().__init__(table.reshape(-1, table.shape[-1]), block_size)
        self.log_table = self.log_table.reshape(table.shape)                    # (V, V, V)

    def __call__(self, idx, targets=None, cache=None):
        return None, self.log_table[idx[:, :1], idx]                           # (B, T, V)

    def by_hand(self, seq, first_target):
        return sum(self.log_table[seq[0], seq[i - 1], seq[i]] for i in range(first_target, len(seq)))


def test_mmi_prefers_the_candidate_that_makes_the_history_likely():
    """Constructed backward model: a response starting with 5 makes the history "3 4 |"
    likely; after the 'bland' token 6 every token is equally likely. The forward model
    prefers 6."""
    back = np.ones((V, V, V))
    back[5, EOT, 3], back[5, 3, 4], back[5, 4, EOT] = 50.0, 50.0, 50.0
    back_lm = FirstTokenLM(back)
    fwd = np.ones((V, V))
    fwd[EOT, 6] = 100.0                                                        # bland is likely
    fwd_lm = BigramLM(fwd)
    history, cands = [np.array([3, 4])], [np.array([6]), np.array([5]), np.array([6, 6])]
    r = mmi_rerank(back_lm, history, cands, eot_id=EOT, pad_id=PAD)
    for c, got in zip(cands, r.backward):                                      # log P(S | T) by hand
        seq = list(c) + [EOT, 3, 4, EOT]
        assert abs(got - back_lm.by_hand(seq, len(c) + 1)) < 1e-12
    assert r.best == 1 and r.backward[1] > r.backward[0]
    assert list(r.order) == list(np.argsort(-r.backward, kind="stable")) and r.forward is None
    # with a large weight on log P(T | S) the forward model's bland favourite wins back
    r = mmi_rerank(back_lm, history, cands, eot_id=EOT, pad_id=PAD, forward_model=fwd_lm, lam=5.0)
    np.testing.assert_allclose(r.forward, forward_scores(fwd_lm, history, cands, eot_id=EOT, pad_id=PAD))
    np.testing.assert_allclose(r.score, r.backward + 5.0 * r.forward)
    assert r.best == 0
    np.testing.assert_allclose(backward_scores(back_lm, history, cands, eot_id=EOT, pad_id=PAD),
                               mmi_rerank(back_lm, history, cands, eot_id=EOT, pad_id=PAD).backward)


def test_distinct_n_worked_example():
    replies = ["i see .", "i see the cat .", "ok ."]
    # unigrams: i see . i see the cat . ok .  -> 10, distinct {i, see, ., the, cat, ok} = 6
    assert distinct_n(replies, 1) == pytest.approx(6 / 10)
    # bigrams: (i see) (see .) (i see) (see the) (the cat) (cat .) (ok .) -> 7, distinct 6
    assert distinct_n(replies, 2) == pytest.approx(6 / 7)
    # trigrams never cross replies: (i see .) (i see the) (see the cat) (the cat .) -> 4 distinct of 4
    assert distinct_n(replies, 3) == 1.0
    as_ids = [np.array([1, 2, 3]), np.array([1, 2, 4, 5, 3]), [6, 3]]
    assert distinct_n(as_ids, 2) == pytest.approx(6 / 7)
    assert distinct_n(["ok ."] * 5, 1) == pytest.approx(2 / 10)
    assert distinct_n(["ok"], 2) == 0.0


def test_bad_input():
    lm = BigramLM(np.ones((V, V)))
    rng = np.random.default_rng(0)
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k \\(the number of candidates\\) must be an integer >= 1"):
            sample_candidates(lm, [np.array([3])], k, eot_id=EOT, rng=rng)
    with pytest.raises(TypeError, match="list of turns"):
        sample_candidates(lm, np.array([3, 4]), 2, eot_id=EOT, rng=rng)
    with pytest.raises(ValueError, match="empty history"):
        sample_candidates(lm, [], 2, eot_id=EOT, rng=rng)
    with pytest.raises(ValueError, match="no candidates"):
        mmi_rerank(lm, [np.array([3])], [], eot_id=EOT, pad_id=PAD)
    with pytest.raises(ValueError, match="pass forward_model"):
        mmi_rerank(lm, [np.array([3])], [np.array([4])], eot_id=EOT, pad_id=PAD, lam=0.5)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        distinct_n(["i see ."], 0)
