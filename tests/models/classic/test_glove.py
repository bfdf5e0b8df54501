"""GloVe: co-occurrence counts by hand, float64 gradcheck of the weighted least squares, AdaGrad, fitting, bad input."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.models.classic.glove import GloVe, cooccurrence, tiny
from minipt.optim import AdaGrad


def test_cooccurrence_weights_by_inverse_distance_both_ways():
    i, j, x = cooccurrence([np.array([0, 1, 2]), np.array([2, 0])], 3, window=2)
    X = np.zeros((3, 3))
    X[i, j] = x
    expected = np.array([[0, 1, 0.5 + 1], [1, 0, 1], [0.5 + 1, 1, 0]])
    np.testing.assert_allclose(X, expected)


def test_gradcheck_float64():
    model, batch = tiny()
    result = check_module(model, *batch, select=lambda out: out[0])
    assert result.passed, str(result)
    assert (batch[2] > 3.0).any() and (batch[2] < 3.0).any()   # both branches of f are checked


def test_weighting_function_caps_at_x_max():
    model = GloVe(3, dim=2, x_max=10.0, alpha=0.75, rng=np.random.default_rng(0), dtype=np.float64)
    model.params["W"][...] = 0
    for name in ("b", "b_tilde"):
        model.params[name][...] = 0
    x = np.array([1.0, 10.0, 1000.0])
    loss, _ = model(np.array([0, 1, 2]), np.array([1, 2, 0]), x)
    f = np.array([0.1 ** 0.75, 1.0, 1.0])
    assert float(loss) == pytest.approx((f * np.log(x) ** 2).sum() / 3)


def test_adagrad_steps_shrink_with_the_sum_of_squares():
    model = GloVe(2, dim=1, rng=np.random.default_rng(0), dtype=np.float64)
    opt = AdaGrad(model, lr=0.1)
    before = model.params["W"].copy()
    model.grads["W"][...] = 2.0
    opt.step()
    step1 = before - model.params["W"]
    opt.step()
    step2 = before - step1 - model.params["W"]
    np.testing.assert_allclose(step1, 0.1)                     # 0.1 * 2 / sqrt(4)
    np.testing.assert_allclose(step2, 0.1 * 2 / np.sqrt(8))
    assert (model.params["b"] == model.params["b"]).all()


def test_fit_lowers_the_loss_and_vectors_are_the_sum():
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 6, 20) + 6 * (k % 2) for k in range(200)]
    i, j, x = cooccurrence(docs, 12, window=3)
    model = GloVe(12, dim=6, x_max=20.0, rng=np.random.default_rng(1))
    history = model.fit(i, j, x, epochs=40, lr=0.1, batch_size=4, rng=np.random.default_rng(2))
    assert history[-1] < 0.2 * history[0]
    np.testing.assert_array_equal(model.vectors(), model.params["W"] + model.params["W_tilde"])
    v = model.vectors() / np.linalg.norm(model.vectors(), axis=1, keepdims=True)
    sims = v @ v.T
    same = (np.arange(12)[:, None] // 6) == (np.arange(12)[None, :] // 6)
    assert sims[same & ~np.eye(12, dtype=bool)].mean() > sims[~same].mean() + 0.3


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="window must be an integer >= 1, got 0"):
        cooccurrence([np.array([1, 2])], 3, window=0)
    with pytest.raises(ValueError, match="corpus has 1 token"):
        cooccurrence([np.array([1])], 3)
    with pytest.raises(ValueError, match="corpus has 0 token"):
        cooccurrence([], 3)
    model = GloVe(3, dim=2, rng=rng)
    with pytest.raises(ValueError, match="positive co-occurrence counts"):
        model(np.array([0]), np.array([1]), np.array([0.0]))
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model(np.array([0]), np.array([5]), np.array([1.0]))
