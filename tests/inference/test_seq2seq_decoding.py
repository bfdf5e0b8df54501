"""Greedy and beam search for encoder-decoder models: the KV-cached path (self-attention
cache, cross-attention keys/values computed once) equals re-running the decoder over the
whole prefix; beam width 1 is greedy; outputs obey start/end tokens and the length bound."""
import numpy as np
import pytest

from minipt.core.module import eval_mode
from minipt.inference.seq2seq_decoding import Encoded, beam_search, greedy
from minipt.models.seq2seq.transformer import tiny

SOURCE = np.array([[3, 4, 5, 6, 2], [7, 8, 3, 0, 0], [5, 5, 1, 0, 0]])


def model_and_eos():
    model, _ = tiny(max_target_len=8)
    free = greedy(model, SOURCE, start_id=1, eos_id=-1)           # no end token: full length
    assert all(len(o) == 8 for o in free)
    return model, free[0][2]                                      # a token greedy emits: make it the end


def test_cached_decoder_steps_equal_the_full_rerun_logits():
    model, _ = model_and_eos()
    prefix = np.array([[1, 4, 6, 2, 7], [1, 8, 8, 3, 3], [1, 2, 3, 4, 5]])
    with eval_mode(model):
        enc = model.encode(SOURCE)
        full = model.decode(prefix, enc)                          # (3, 5, V)
        cache = model.new_cache()
        steps = [model.decode(prefix[:, t:t + 1], enc, cache=cache)[:, 0] for t in range(5)]
    np.testing.assert_allclose(np.stack(steps, 1), full, rtol=1e-12, atol=1e-12)
    assert cache.length == 5 and cache[0].cross_k.shape == (3, 2, 5, 4)


def test_greedy_cached_equals_uncached_and_stops_at_the_end_token():
    model, eos = model_and_eos()
    cached = greedy(model, SOURCE, start_id=1, eos_id=eos)
    rerun = greedy(model, SOURCE, start_id=1, eos_id=eos, cache=False)
    assert cached == rerun
    assert len(cached[0]) == 2 and eos not in sum(cached, [])     # ended where the end token came
    # each output token is the argmax given the gold prefix (teacher forcing), end token after it
    with eval_mode(model):
        for b, out in enumerate(cached):
            _, logits = model(SOURCE[b:b + 1], np.array([[1, *out][:8]]))
            picks = logits[0].argmax(-1).tolist()
            assert picks[:len(out)] == out
            if len(out) < 8:
                assert picks[len(out)] == eos


@pytest.mark.parametrize("width", [2, 3, 5])
def test_beam_search_cached_equals_uncached(width):
    model, eos = model_and_eos()
    for row in SOURCE:
        row = row[row != 0]
        a = beam_search(model, row, start_id=1, eos_id=eos, beam_size=width)
        b = beam_search(model, row, start_id=1, eos_id=eos, beam_size=width, cache=False)
        assert a == b and eos not in a and len(a) <= 8


def test_beam_width_one_is_greedy():
    model, eos = model_and_eos()
    for row in SOURCE:
        row = row[row != 0]
        assert beam_search(model, row, start_id=1, eos_id=eos, beam_size=1) == \
            greedy(model, row[None], start_id=1, eos_id=eos)[0]


def test_beam_output_scores_at_least_as_well_as_greedy_here():
    """On this model and these sources the wider search finds a continuation whose
    length-normalised log-probability is no lower than greedy's."""
    model, eos = model_and_eos()

    def normalised(row, out):
        ends = [*out, eos] if len(out) < 8 else out
        with eval_mode(model):
            _, logits = model(row[None], np.array([[1, *ends[:-1]]]))
        z = logits[0] - logits[0].max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        lp = sum(logp[t, y] for t, y in enumerate(ends))
        return lp / ((5 + len(ends)) / 6) ** 0.6

    for row in SOURCE:
        row = row[row != 0]
        g = greedy(model, row[None], start_id=1, eos_id=eos)[0]
        b = beam_search(model, row, start_id=1, eos_id=eos, beam_size=4)
        assert normalised(row, b) >= normalised(row, g) - 1e-12


def test_encoded_select_reorders_rows():
    enc = Encoded(np.arange(12.0).reshape(3, 2, 2), np.array([[[True, False]], [[True, True]], [[False, True]]]))
    sel = enc.select(np.array([2, 0, 0]))
    assert sel.memory[:, 0, 0].tolist() == [8.0, 0.0, 0.0] and sel.mask[0, 0].tolist() == [False, True]
    assert Encoded(enc.memory, None).select(np.array([1])).mask is None


def test_bad_input_is_refused_by_name():
    model, eos = model_and_eos()
    with pytest.raises(ValueError, match="max_new_tokens 9 exceeds the decoder's max_target_len 8"):
        greedy(model, SOURCE, start_id=1, eos_id=eos, max_new_tokens=9)
    with pytest.raises(ValueError, match=r"source must be a non-empty \(S,\)"):
        beam_search(model, SOURCE, start_id=1, eos_id=eos)
    with pytest.raises(ValueError, match=r"non-empty \(B, S\)"):
        greedy(model, np.zeros((2, 0), dtype=np.int64), start_id=1, eos_id=eos)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, SOURCE[0], start_id=1, eos_id=eos, beam_size=0)
    with pytest.raises(IndexError, match="99"):
        greedy(model, np.array([[3, 99]]), start_id=1, eos_id=eos)
