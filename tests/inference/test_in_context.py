"""Bulk next-token scoring: equal to a plain forward, padding-proof, greedy and choice agree."""
import numpy as np
import pytest

from minipt.inference.scoring import next_token_logits, one_token_answers
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.tasks.metrics import accuracy, word_accuracy
from minipt.tokenizers.word import WordTokenizer


@pytest.fixture(scope="module")
def model():
    """A small GPT-3 (a banded layer included) in float64, its embedding scaled up so that
    the next-token distribution differs from prompt to prompt."""
    m = GPT(GPTConfig.gpt3(vocab_size=12, block_size=10, n_layer=2, n_head=2, d_model=16),
            rng=np.random.default_rng(0)).to(np.float64)
    m.wte.params["weight"] *= 50.0
    return m


def test_logits_equal_a_plain_forward_whatever_the_padding_and_batch(model):
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 1], [2]]
    expected = np.stack([model(np.array([p]))[1][0, -1] for p in prompts])      # (N, V)
    assert np.allclose(next_token_logits(model, prompts), expected, atol=1e-5)
    assert np.allclose(next_token_logits(model, prompts, pad_id=11, batch_size=2), expected, atol=1e-5)
    assert model.training


def test_greedy_is_the_argmax_and_choice_the_best_candidate(model):
    tok = WordTokenizer(specials=["<pad>"]).fit("a b c d e f g h i j")
    prompts = ["a b c", "d e", "f g h i"]
    cands = [["a", "b"], ["c", "j"], ["i"]]
    logits = next_token_logits(model, [tok.encode(p) for p in prompts])
    greedy, chosen = one_token_answers(model, tok, prompts, cands)
    assert greedy == [tok.id_to_token(int(i)) for i in logits.argmax(1)]
    for row, c, pick in zip(logits, cands, chosen):
        assert pick == c[int(np.argmax([row[tok.token_to_id(w)] for w in c]))]
    assert one_token_answers(model, tok, prompts)[1] is None


def test_accuracies():
    assert accuracy(["a", "b", "c"], ["a", "x", "c"]) == pytest.approx(2 / 3)
    assert word_accuracy("na ze siki".split(), "na ze dome".split()) == pytest.approx(2 / 3)
    assert word_accuracy("na".split(), "na ze".split()) == 0.5
    assert word_accuracy("na ze siki .".split(), "na ze".split()) == 0.5


def test_bad_input(model):
    tok = WordTokenizer(specials=["<pad>"]).fit("a b")
    with pytest.raises(ValueError, match="non-empty"):
        next_token_logits(model, [[1], []])
    with pytest.raises(ValueError, match="context holds 10"):
        next_token_logits(model, [[1] * 11])
    with pytest.raises(ValueError, match="candidate lists"):
        one_token_answers(model, tok, ["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="equal, non-empty"):
        accuracy([], [])
    with pytest.raises(ValueError, match="reference is empty"):
        word_accuracy(["a"], [])
