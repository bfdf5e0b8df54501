"""Behaviour of the ops beyond their gradients: values, accumulation, statistics, bad input.
(Gradients: tests/test_selfcheck.py runs every op's float64 gradcheck.)"""
import numpy as np
import pytest

from minipt.ops.activations import gelu_forward, gelu_tanh_forward, swiglu_forward
from minipt.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minipt.ops.dropout import dropout_forward
from minipt.ops.embedding import embedding_backward, embedding_forward
from minipt.ops.norms import layer_norm_forward, rms_norm_forward
from minipt.ops.softmax import log_softmax_forward, softmax_forward


def test_embedding_repeated_ids_accumulate():
    w = np.arange(12, dtype=np.float64).reshape(4, 3)
    ids = np.array([[2, 2, 0]])
    y, cache = embedding_forward(ids, w)
    assert np.array_equal(y[0, 1], w[2])
    dw = embedding_backward(np.ones((1, 3, 3)), cache)
    assert np.array_equal(dw[:, 0], [1.0, 0.0, 2.0, 0.0])


def test_embedding_bad_ids():
    w = np.zeros((4, 3), np.float32)
    with pytest.raises(IndexError, match="token id 4 is outside the vocabulary"):
        embedding_forward(np.array([1, 4]), w)
    with pytest.raises(IndexError, match="token id -1"):
        embedding_forward(np.array([-1]), w)
    with pytest.raises(TypeError, match="integer"):
        embedding_forward(np.array([1.0]), w)


def test_layer_norm_and_rms_norm_values():
    x = np.random.default_rng(0).standard_normal((5, 8)) * 3 + 2
    y, _ = layer_norm_forward(x, np.ones(8), np.zeros(8), 1e-5)
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.std(-1), 1, rtol=1e-5)
    r, _ = rms_norm_forward(x, np.ones(8), 1e-6)
    np.testing.assert_allclose((r ** 2).mean(-1), 1, rtol=1e-5)


def test_norm_bad_input():
    with pytest.raises(ValueError, match="expected last dimension 8"):
        layer_norm_forward(np.zeros((2, 7)), np.ones(8), np.zeros(8))
    with pytest.raises(TypeError, match="dtype mismatch"):
        layer_norm_forward(np.zeros((2, 8), np.float32), np.ones(8), np.zeros(8))


def test_gelu_variants_agree_closely_and_match_known_values():
    x = np.linspace(-4, 4, 101)
    exact, _ = gelu_forward(x)
    approx, _ = gelu_tanh_forward(x)
    assert np.max(np.abs(exact - approx)) < 1e-3
    assert gelu_forward(np.array([1.0]))[0][0] == pytest.approx(0.8413447460685429)   # Phi(1)


def test_swiglu_shape_mismatch():
    with pytest.raises(ValueError, match="gate shape"):
        swiglu_forward(np.zeros((2, 3)), np.zeros((2, 4)))


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4]])
    y, _ = softmax_forward(x)
    lp, _ = log_softmax_forward(x)
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(lp))
    np.testing.assert_allclose(y.sum(-1), 1)
    assert lp[0, 0] == 0.0 and lp[0, 1] == -1e4


def test_cross_entropy_equals_direct_computation_and_ignores():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 4, 7))
    t = rng.integers(0, 7, (2, 4))
    t[0, 1] = t[1, 3] = -100
    loss, cache = cross_entropy_forward(z, t)
    p = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    keep = t != -100
    direct = -np.log(p[keep, t[keep]]).mean()
    assert float(loss) == pytest.approx(direct, rel=1e-12)
    dz = cross_entropy_backward(1.0, cache)
    assert np.all(dz[0, 1] == 0) and np.all(dz[1, 3] == 0)


def test_cross_entropy_all_ignored_is_zero_not_nan():
    loss, cache = cross_entropy_forward(np.zeros((3, 5)), np.full(3, -100))
    assert float(loss) == 0.0 and not np.any(cross_entropy_backward(1.0, cache))


def test_cross_entropy_bad_input():
    z = np.zeros((2, 5))
    with pytest.raises(IndexError, match="target id 5 is outside"):
        cross_entropy_forward(z, np.array([0, 5]))
    with pytest.raises(ValueError, match=r"expected shape \(2,\)"):
        cross_entropy_forward(z, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy_forward(z, np.array([0, 1]), label_smoothing=1.0)


def test_dropout_statistics_and_replay():
    x = np.ones(200_000, np.float32)
    y, _ = dropout_forward(x, 0.3, np.random.default_rng(0))
    kept = (y != 0).mean()
    assert abs(kept - 0.7) < 5 * np.sqrt(0.21 / x.size)                 # binomial, 5 sigma
    assert abs(y.mean() - 1.0) < 5 * np.sqrt(0.3 / 0.7 / x.size)        # inverted: mean kept
    y2, _ = dropout_forward(x, 0.3, np.random.default_rng(0))
    assert np.array_equal(y, y2) and y.dtype == np.float32
    assert dropout_forward(x, 0.3, None, training=False)[0] is x


def test_dropout_bad_p():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        dropout_forward(np.ones(3), 1.0, np.random.default_rng(0))
