"""DialoGPT's inputs (minipt.objectives.dialogue): targets only where the paper puts
the loss, turn order reversed for the backward model, padding ignored."""
import numpy as np
import pytest

from minipt.data.toy_text_tasks import dialogue
from minipt.data.toy_words import word_tokenizer
from minipt.objectives.common import IGNORE
from minipt.objectives.dialogue import (
    DialogueBatches,
    backward_example,
    context_ids,
    dialogue_examples,
    encode_session,
    forward_example,
    pad_batch,
    session_pairs,
)
from minipt.tokenizers.special import ENDOFTEXT

EOT = 1
H1, H2, R = np.array([10, 11, 12]), np.array([20, 21]), np.array([30, 31, 32, 33])


def test_forward_example_targets_only_the_response_and_its_separator():
    x, y = forward_example([H1, H2], R, EOT)
    seq = [10, 11, 12, EOT, 20, 21, EOT, 30, 31, 32, 33, EOT]
    np.testing.assert_array_equal(x, seq[:-1])
    start = seq.index(30)                          # the response's first token in seq
    for i in range(len(y)):                        # y[i] is the token after x[i]
        want = seq[i + 1] if i + 1 >= start else IGNORE
        assert y[i] == want, f"position {i}: expected {want}, got {y[i]}"
    # the counted targets are exactly "r |"
    np.testing.assert_array_equal(y[y != IGNORE], list(R) + [EOT])


def test_backward_example_reverses_the_turns_and_targets_the_history():
    x, y = backward_example([H1, H2], R, EOT)
    seq = [30, 31, 32, 33, EOT, 20, 21, EOT, 10, 11, 12, EOT]     # r | h_2 | h_1 |
    np.testing.assert_array_equal(x, seq[:-1])
    for i in range(len(y)):
        want = seq[i + 1] if i + 1 >= len(R) + 1 else IGNORE
        assert y[i] == want, f"position {i}: expected {want}, got {y[i]}"
    np.testing.assert_array_equal(y[y != IGNORE], [20, 21, EOT, 10, 11, 12, EOT])


def test_words_of_a_real_session_land_where_they_should():
    tok = word_tokenizer()
    eot = tok.token_to_id(ENDOFTEXT)
    turns = ["the old king sleeps .", "the king finds his gold .", "i see ."]
    ids = encode_session(turns, tok)
    (_, _), (hist, resp) = session_pairs(ids)
    x, y = forward_example(hist, resp, eot)
    assert tok.decode(x) == f"the old king sleeps . {ENDOFTEXT} the king finds his gold . {ENDOFTEXT} i see ."
    assert tok.decode(y[y != IGNORE]) == f"i see . {ENDOFTEXT}"
    x, y = backward_example(hist, resp, eot)
    assert tok.decode(x) == f"i see . {ENDOFTEXT} the king finds his gold . {ENDOFTEXT} the old king sleeps ."
    assert tok.decode(y[y != IGNORE]) == f"the king finds his gold . {ENDOFTEXT} the old king sleeps . {ENDOFTEXT}"


def test_session_pairs_one_per_response_and_max_history():
    turns = [np.array([i + 2]) for i in range(4)]
    pairs = session_pairs(turns)
    assert [len(h) for h, _ in pairs] == [1, 2, 3]
    assert [int(r[0]) for _, r in pairs] == [3, 4, 5]
    assert [[int(t[0]) for t in h] for h, _ in session_pairs(turns, max_history=2)] == [[2], [2, 3], [3, 4]]


def test_max_len_drops_the_oldest_turns_first():
    x, y = forward_example([H1, H2], R, EOT, max_len=8)   # full x has 11 tokens; without H1 it has 7
    np.testing.assert_array_equal(x, [20, 21, EOT, 30, 31, 32, 33])
    x, _ = backward_example([H1, H2], R, EOT, max_len=8)
    np.testing.assert_array_equal(x, [30, 31, 32, 33, EOT, 20, 21])
    with pytest.raises(ValueError, match="do not fit in max_len=5"):
        forward_example([H1, H2], R, EOT, max_len=5)


def test_padding_is_ignored():
    ex = [forward_example([H1], R, EOT), forward_example([H1, H2], R, EOT)]
    x, y = pad_batch(ex, pad_id=0)
    assert x.shape == y.shape == (2, len(ex[1][0]))
    n = len(ex[0][0])
    assert np.all(x[0, n:] == 0) and np.all(y[0, n:] == IGNORE)
    np.testing.assert_array_equal(y[0, :n], ex[0][1])
    np.testing.assert_array_equal(x[1], ex[1][0])


def test_batches_come_from_toy_sessions_and_fit_the_context():
    tok = word_tokenizer()
    data = dialogue((30, 10, 10), seed=0)
    sessions = [e["turns"] for e in data.train]
    n_pairs = sum(len(s) - 1 for s in sessions)
    assert len(dialogue_examples(sessions, tok, "forward")) == n_pairs
    batches = DialogueBatches.from_sessions(sessions, [e["turns"] for e in data.val], tok, "backward",
                                            batch_size=5, max_len=40)
    x, y = batches.get_batch("train", np.random.default_rng(0))
    assert x.shape[0] == 5 and x.shape == y.shape and x.shape[1] <= 40
    pad = tok.token_to_id("<pad>")
    assert np.all(y[x == pad] == IGNORE)
    # every row's counted targets end with the separator that closes the oldest history turn
    for row in y:
        assert row[row != IGNORE][-1] == tok.token_to_id(ENDOFTEXT)
    with pytest.raises(KeyError, match="split must be"):
        batches.get_batch("test", np.random.default_rng(0))


def test_context_ids_is_the_forward_prompt():
    np.testing.assert_array_equal(context_ids([H1, H2], EOT), [10, 11, 12, EOT, 20, 21, EOT])
    x, _ = forward_example([H1, H2], R, EOT)
    np.testing.assert_array_equal(x[:7], context_ids([H1, H2], EOT))


def test_bad_input():
    tok = word_tokenizer()
    with pytest.raises(ValueError, match="empty session"):
        encode_session([], tok)
    with pytest.raises(TypeError, match="list of turn strings"):
        encode_session("the cat sleeps .", tok)
    with pytest.raises(ValueError, match="turn 1 is empty"):
        encode_session(["the cat sleeps .", "  "], tok)
    with pytest.raises(ValueError, match="contains the separator"):
        encode_session([f"the cat {ENDOFTEXT} sleeps ."], tok)
    with pytest.raises(ValueError, match="1 turn\\(s\\) has no response"):
        session_pairs(encode_session(["the cat sleeps ."], tok))
    with pytest.raises(ValueError, match="1 turn\\(s\\) has no response"):
        dialogue_examples([["the cat sleeps ."]], tok)
    with pytest.raises(ValueError, match="max_history must be >= 1"):
        session_pairs([H1, H2], max_history=0)
    with pytest.raises(ValueError, match="empty history"):
        forward_example([], R, EOT)
    with pytest.raises(ValueError, match="direction must be"):
        dialogue_examples([["a .", "b ."]], tok, "sideways")
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        DialogueBatches([forward_example([H1], R, EOT)], [forward_example([H1], R, EOT)], 0, 0)
    with pytest.raises(ValueError, match="the val split has no examples"):
        DialogueBatches([forward_example([H1], R, EOT)], [], 2, 0)
