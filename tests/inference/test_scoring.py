"""Scoring continuations without gradient steps: equal to a plain forward, padding-proof."""
import numpy as np
import pytest

from minipt.inference.scoring import (
    choose,
    continuation_logprobs,
    greedy_answer,
    mean_logprob,
)
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.ops.softmax import log_softmax_forward


@pytest.fixture(scope="module")
def model():
    m = GPT(GPTConfig.gpt2(vocab_size=11, block_size=12, n_layer=2, n_head=2, d_model=16), rng=np.random.default_rng(0))
    for _, p in m.named_parameters():
        p[...] += np.random.default_rng(1).standard_normal(p.shape).astype(np.float32) * 0.3
    return m


def test_logprobs_match_a_plain_forward_and_ignore_padding(model):
    prompt, cont = [1, 2, 3], [4, 5]
    _, logits = model(np.array([prompt + cont[:-1]]))
    logp, _ = log_softmax_forward(logits.astype(np.float64))
    expected = [logp[0, 2, 4], logp[0, 3, 5]]
    alone = continuation_logprobs(model, [(prompt, cont)])[0]
    batched = continuation_logprobs(model, [([7, 8, 9, 1, 2, 3, 4, 5, 6], [1]), (prompt, cont)], pad_id=0)[1]
    assert np.allclose(alone, expected, atol=1e-5) and np.allclose(batched, alone, atol=1e-5)


def test_choose_and_mean_logprob_agree_with_the_scores(model):
    choices = [[4], [5, 6], [7]]
    scores = [lp.mean() for lp in continuation_logprobs(model, [([1, 2], c) for c in choices])]
    assert choose(model, [1, 2], choices) == int(np.argmax(scores))
    assert np.allclose(mean_logprob(model, choices, [1, 2]), scores)


def test_greedy_answer_stops_at_the_stop_token(model):
    out = greedy_answer(model, [1, 2, 3], stop_ids={0}, max_new_tokens=5)
    assert len(out) <= 5 and 0 not in out


def test_bad_input(model):
    with pytest.raises(ValueError, match="empty"):
        continuation_logprobs(model, [([1], [])])
    with pytest.raises(ValueError, match="context holds 13"):
        continuation_logprobs(model, [([1] * 12, [2, 3])])
    with pytest.raises(ValueError, match="reduce"):
        choose(model, [1], [[2]], reduce="max")
