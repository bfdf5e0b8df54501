"""LSTM, BiLSTM, CharCNN, Highway and ScalarMix modules: float64 gradchecks (padding,
states in, LSTMP, residual, both BiLSTM merges), the reversal keeps padding in place,
the forget bias starts at 1, unknown characters map to <unk>."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.core.module import Module
from minipt.nn.char_cnn import CharCNN, CharVocab, Highway
from minipt.nn.lstm import LSTM, BiLSTM, reverse_padded
from minipt.nn.scalar_mix import ScalarMix

F64 = np.float64


class Stacked(Module):
    """Every layer's output as one (L, B, T, 2P) array, so one check covers all layers."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, lengths):
        return np.stack(self.inner(x, lengths))

    def backward(self, dy):
        return self.inner.backward(list(dy))


@pytest.mark.parametrize("proj,residual", [(None, False), (3, False), (4, True)])
def test_lstm_module_gradcheck_with_states_and_padding(proj, residual):
    r = np.random.default_rng(0)
    m = LSTM(4, 5, proj_size=proj, residual=residual, rng=r, dtype=F64)
    P = proj or 5
    x, h0, c0 = r.standard_normal((3, 4, 4)), r.standard_normal((3, P)), r.standard_normal((3, 5))
    res = check_module(m, x, h0, c0, np.array([4, 2, 1]))
    assert res.passed, str(res)


def test_forget_bias_is_one():
    m = LSTM(3, 4, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(m.params["bias"], [0] * 4 + [1] * 4 + [0] * 8)


def test_reverse_padded():
    x = np.arange(8).reshape(2, 4, 1)
    np.testing.assert_array_equal(reverse_padded(x, np.array([4, 2]))[..., 0], [[3, 2, 1, 0], [5, 4, 6, 7]])
    np.testing.assert_array_equal(reverse_padded(reverse_padded(x, np.array([3, 2])), np.array([3, 2])), x)


@pytest.mark.parametrize("merge,residual", [("concat", False), ("separate", False), ("separate", True)])
def test_bilstm_gradcheck_padded_stacked(merge, residual):
    r = np.random.default_rng(1)
    m = BiLSTM(3, 4, n_layers=2, proj_size=3, residual=residual, merge=merge, rng=r, dtype=F64)
    x, lengths = r.standard_normal((3, 5, 3)), np.array([5, 3, 1])
    res = check_module(Stacked(m), x, lengths)
    assert res.passed, str(res)


def test_bilstm_backward_direction_sees_only_the_row():
    """A padded row's outputs equal that row run alone: padding never leaks into the
    backward direction's start."""
    r = np.random.default_rng(2)
    m = BiLSTM(3, 4, n_layers=2, merge="concat", rng=r, dtype=F64)
    x = r.standard_normal((2, 5, 3))
    x[1, 2:] = 50.0
    outs = m(x, np.array([5, 2]))
    alone = m(x[1:2, :2])
    for o, a in zip(outs, alone):
        np.testing.assert_allclose(o[1, :2], a[0], rtol=1e-12)
        assert np.all(o[1, 2:] == 0)


def test_highway_and_scalar_mix_gradcheck():
    r = np.random.default_rng(3)
    hw = Highway(5, rng=r, dtype=F64)
    hw.gate.params["bias"][...] = r.standard_normal(5)          # away from the -2 start
    res = check_module(hw, r.standard_normal((4, 5)))
    assert res.passed, str(res)
    mix = ScalarMix(3, dtype=F64)
    mix.params["weights"][...] = r.standard_normal(3)
    layers = [r.standard_normal((2, 3, 4)) for _ in range(3)]
    res = check_module(mix, layers)
    assert res.passed, str(res)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_char_cnn_gradcheck(activation):
    r = np.random.default_rng(4)
    vocab = CharVocab("abcde", max_chars=7)
    m = CharCNN(vocab.size, 3, ((1, 2), (2, 3), (3, 2)), n_highway=2, out_dim=4, rng=r, activation=activation,
                dtype=F64)
    for conv in m.convs:                                          # some pooled maxima below 0: relu's kink
        conv.params["bias"][...] = r.standard_normal(conv.params["bias"].shape)
    chars = vocab.encode(["abc", "e", "dcbaed", "bad", "ab"]).reshape(1, 5, 7)
    res = check_module(m, chars)
    assert res.passed, str(res)
    assert m(chars).shape == (1, 5, 4)


def test_char_vocab_unknown_and_truncation():
    v = CharVocab("abc", max_chars=5)
    ids = v.encode(["ab", "axz", "abcabc", ""])
    bow, eow, unk = 1, 2, 3
    a, b, c = v.stoi["a"], v.stoi["b"], v.stoi["c"]
    np.testing.assert_array_equal(ids, [[bow, a, b, eow, 0], [bow, a, unk, unk, eow],
                                        [bow, a, b, c, eow], [bow, eow, 0, 0, 0]])
    with pytest.raises(ValueError, match="max_chars must be >= 3"):
        CharVocab("abc", max_chars=2)
    m = CharCNN(v.size, 2, ((6, 2),), 1, 3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="widest filter 6"):
        m(ids)
