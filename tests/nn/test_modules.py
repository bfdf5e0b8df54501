import numpy as np
import pytest

from minipt.nn import Dropout, Embedding, FeedForward, LayerNorm, Linear, Sequential


def test_names_and_counts():
    rng = np.random.default_rng(0)
    ff = FeedForward(4, 8, rng=rng, activation="gelu")
    assert list(ff.parameters()) == ["c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]
    sw = FeedForward(4, 8, rng=rng, activation="swiglu", bias=False)
    assert list(sw.parameters()) == ["w1.weight", "w3.weight", "w2.weight"]
    seq = Sequential(Linear(4, 4, rng=rng), LayerNorm(4))
    assert list(seq.parameters()) == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]
    assert seq.num_parameters() == 20 + 8


def test_grads_accumulate_until_zero_grad():
    m = Linear(3, 2, rng=np.random.default_rng(0))
    x = np.ones((1, 3), np.float32)
    for _ in range(2):
        m.backward(np.ones_like(m(x)))
    assert np.all(m.grads["bias"] == 2)
    m.zero_grad()
    assert not np.any(m.grads["bias"])


def test_dropout_module_train_eval():
    d = Dropout(0.5, rng=np.random.default_rng(0))
    x = np.ones((4, 100), np.float32)
    assert np.any(d(x) == 0)
    d.eval()
    assert np.array_equal(d(x), x)
    with pytest.raises(ValueError, match="needs an np.random.Generator"):
        Dropout(0.1)


def test_bad_inputs_name_the_problem():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        FeedForward(4, 8, rng=rng, activation="swish")
    with pytest.raises(IndexError, match="token id 9"):
        Embedding(5, 4, rng=rng)(np.array([9]))
    with pytest.raises(ValueError, match="expected last dimension 4"):
        LayerNorm(4)(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="at least one layer"):
        Sequential()
